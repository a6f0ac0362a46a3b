// Picks the CPU backend (ISA) and splits a validated job over the thread pool.
#pragma once

#include "cpu/backend.hpp"

namespace tinyla::cpu {

// Runs the job over the whole batch. Returns false only when memory for
// scratch could not be allocated.
bool execute(dtype t, const job& jb);

const backend_table& current_backend();
// Selects a backend by name ("avx512", "avx2", "vec128", "scalar"); returns
// false (and changes nothing) if it is unknown or this CPU cannot run it.
bool select_backend(const char* name);

void set_num_threads(int n);
int num_threads();

}  // namespace tinyla::cpu
