// Picks the CPU backend (ISA) and splits a validated job over the thread pool.
#pragma once

#include "cpu/backend.hpp"

namespace tinyla::cpu {

// Runs the job over the whole batch. Returns false only when memory for
// scratch could not be allocated.
bool execute(dtype t, const job& jb);

// The backend chosen for this CPU (or by TINYLA_ISA / select_backend): its name is
// tinyla_cpu_backend()'s.
const backend_table& current_backend();
// The backend that runs op `kind` on matrices of order n: the chosen one, except that where
// it was chosen for this CPU and the CPU splits 512-bit operations in two (AMD Zen 4), n
// above the unrolled sizes, and the unrolled ones where AVX-512's kernels measured slower
// (avx2_is_faster_when_split), run AVX2's kernels. Every backend gives the same bits.
const backend_table& backend_for(dtype t, op kind, std::int64_t n);
bool avx2_is_faster_when_split(dtype t, op kind, std::int64_t n);
// That exception as a rule: the backend for those n, given the best one.
const backend_table* loop_backend_for(const backend_table* best, bool splits_512_bit_operations);
// Selects a backend by name ("avx512", "avx2", "vec128", "scalar") for every n; returns
// false (and changes nothing) if it is unknown or this CPU cannot run it.
bool select_backend(const char* name);
// Back to the choice for this CPU (TINYLA_ISA's where it is set), as at the first call.
void choose_backend_for_this_cpu();

void set_num_threads(int n);
int num_threads();

}  // namespace tinyla::cpu
