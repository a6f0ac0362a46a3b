// Prints the GPU launch plans (src/gpu/plan.hpp) of the QMC workload's ops,
// one tab-separated line per op, dtype and n, for scripts/gpu-report: which
// kernel runs, with how many threads per block and how much dynamic shared
// memory. Host code only: the plan is the one the GPU backend launches with on that
// platform (the per-thread inverses stage their outputs on CUDA alone).
//   tinyla_gpu_plans [batch] [max n] [cuda | hip]      (defaults: 4096 * 64, 32, cuda)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/plan.hpp"

using namespace tinyla;
using namespace tinyla::TINYLA_KERNEL_NS;

namespace {

struct workload_op {
  const char* name;
  op kind;
  bool transpose_x;
  bool one_rhs;  // solve: one right-hand side (else none)
};
// slogdet: the forward pass; slogdet_inv (A^-T): its gradient; inv; solve with one right-hand side;
// det_cofactors: det and its gradient (jax.grad of det); then log_det_laplacian (below).
constexpr workload_op ops[] = {{"slogdet", op::slogdet, false, false},
                               {"slogdet_inv", op::slogdet_inv, true, false},
                               {"inv", op::inv, false, false},
                               {"solve", op::solve, false, true},
                               {"det_cofactors", op::adjugate, true, false}};

template <class E> void print_plans(dtype t, long long batch, int max_n, const plan_options& options) {
  for (const workload_op& o : ops)
    for (int n = 1; n <= max_n; ++n) {
      const job jb{.kind = o.kind, .batch = batch, .n = n, .nrhs = o.one_rhs ? 1 : 0, .transpose_x = o.transpose_x};
      const launch_plan p = plan_launch<E>(jb, options);  // TINYLA_GPU_TEAMS as the launcher
      dispatch_kernel<E>(jb, p, [&]<family F, int N>() {
        // team_in_warp: the LU in shared memory with each team in a warp slot (plan.hpp)
        const bool in_warp =
            !p.per_thread && p.warp_width == 0 && team_in_warp(p.team_size, p.block_threads, p.workspace_bytes == 0);
        std::printf("%s\t%s\t%d\t%s\t%d\t%d\t%lld\t%lld\t%lld\t%d\n", o.name, dtype_name(t), n,
                    (p.inverse_in_shared ? team_inverse_kernel_name(t, N) : kernel_name(t, F, N)).text, p.block_threads,
                    p.team_size, (long long)p.blocks, (long long)p.shared_bytes, (long long)p.workspace_bytes,
                    int(in_warp));
      });
    }
  // log_det_laplacian (folx's rule for one determinant): its own kernel, n <= max_laplacian_n;
  // team_size: the threads of a group (one tangent at a time), the groups in warps.
  for (int n = 1; n <= max_n && n <= max_laplacian_n; ++n) {
    const job jb{.kind = op::log_det_laplacian, .batch = batch, .n = n, .tangent_count = 3 * n};
    const launch_plan p = plan_launch<E>(jb, options);
    std::printf("log_det_laplacian\t%s\t%d\t%s\t%d\t%d\t%lld\t%lld\t0\t1\n", dtype_name(t), n,
                laplacian_kernel_name(t, n).text, p.block_threads, p.team_size, (long long)p.blocks,
                (long long)p.shared_bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long long batch = argc > 1 ? std::atoll(argv[1]) : 4096LL * 64;
  const int max_n = argc > 2 ? std::atoi(argv[2]) : 32;
  const char* platform = argc > 3 ? argv[3] : "cuda";
  const bool cuda = std::strcmp(platform, "cuda") == 0;
  if (!cuda && std::strcmp(platform, "hip") != 0) {
    std::fprintf(stderr, "tinyla_gpu_plans: the platform is cuda or hip, not %s\n", platform);
    return 2;
  }
  const plan_options options = launch_options(cuda);
  std::printf("op\tdtype\tn\tkernel\tblock_threads\tteam_size\tblocks\tshared_bytes\tworkspace_bytes\tteam_in_warp\n");
  for (int d = 0; d < dtype_count; ++d)
    with_dtype(dtype(d), [&](auto info) {
      print_plans<kernel_element<typename decltype(info)::type>>(dtype(d), batch, max_n, options);
    });
}
