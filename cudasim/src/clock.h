/* SPDX-License-Identifier: MIT */
// Vector clocks over agents (agent 0: the host; each stream an agent of its own): what an
// operation is ordered after. Operation o of agent a at epoch e happens before work whose
// clock c has c[a] >= e.
#ifndef CUDASIM_CLOCK_H
#define CUDASIM_CLOCK_H

#include <cstdint>
#include <vector>

namespace cudasim
{

struct VClock {
    std::vector<uint64_t> t;

    uint64_t get(uint32_t agent) const { return agent < t.size() ? t[agent] : 0; }
    void set(uint32_t agent, uint64_t v)
    {
        if (agent >= t.size())
            t.resize(agent + 1, 0);
        t[agent] = v;
    }
    void join(const VClock &o)
    {
        if (o.t.size() > t.size())
            t.resize(o.t.size(), 0);
        for (size_t i = 0; i < o.t.size(); i++)
            if (o.t[i] > t[i])
                t[i] = o.t[i];
    }
    bool covers(uint32_t agent, uint64_t epoch) const { return get(agent) >= epoch; }
};

} // namespace cudasim

#endif
