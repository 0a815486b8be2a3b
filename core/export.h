/* SPDX-License-Identifier: MIT */
/* ZT_MODULE_API: an internal function that libztier.so exports for its backend modules
 * (libztier-cuda.so, -nccl.so, -mpi.so; core/module.h), so that a module shares the process's
 * log sink, trace and error records instead of carrying copies. Not part of the public API:
 * no compatibility promise beyond ZT_MODULE_ABI. Everything else stays hidden. */
#ifndef ZT_CORE_EXPORT_H
#define ZT_CORE_EXPORT_H

#define ZT_MODULE_API __attribute__((visibility("default")))

#endif
