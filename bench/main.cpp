// dash-bench: benchmarks of the dash library.
//   dash-bench solvers [options]   inverse-root solvers on (N, b, b) stacks
//   dash-bench accuracy [options]  matmuls each iterative solver needs for 1e-2 and 1e-3 error
//   dash-bench step [options]      optimizer steps on model shapes (AdamW, sequential, batched)
//   dash-bench distributed [options]  DASH steps on N local Gloo ranks: time, memory, bytes sent

#include "accuracy_bench.h"
#include "arguments.h"
#include "distributed_bench.h"
#include "solver_bench.h"
#include "step_bench.h"

#include <c10/util/Exception.h>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string usage =
      "usage: dash-bench solvers [--preset quick|full] [--device cpu|cuda] [--p 4] [--cond 1e3]\n"
      "                          [--methods " +
      dash::bench::solver_method_names() +
      "] [--warmup 1] [--reps 3] [--json PATH]\n"
      "                          [--warm-start 0|1] [--ema-beta 0.95] [--ema-steps 10] [--eigen-tolerances "
      "0.02,0.05,0.1]\n"
      "                          [--tf32 0|1]\n"
      "                          (--warm-start 1: the matrices are factors after --ema-steps EMA updates, and\n"
      "                           evd-warm rows start from the eigenbasis before them, once per tolerance)\n"
      "       dash-bench accuracy [--b 128] [--count 8] [--p 4] [--conds 1e2,1e4,1e6]\n"
      "                       [--methods " +
      dash::bench::accuracy_method_names() +
      "] [--scalings fro,pi,multi-pi]\n"
      "                       [--precisions fp32,fp16,bf16] [--max-steps 30] [--minimax-interval-min 1e-6]\n"
      "                       [--epsilon 0] [--device cpu|cuda] [--warmup 1] [--reps 3] [--json PATH]\n"
      "       dash-bench step [--preset llama-tiny|llama-953m|smoke] [--layers N] [--shapes 512x512,512]\n"
      "                       [--block 256] [--frequencies 1,10] [--preconditioners " +
      dash::bench::preconditioner_names() + "]\n                       [--methods " +
      dash::bench::solver_method_names() +
      "]\n"
      "                       [--scalings fro,pi,multi-pi] [--precisions fp32,fp16,bf16] [--baseline 1]\n"
      "                       [--warmup 1] [--steps K] [--device cpu|cuda] [--profile 0|1] [--json PATH]\n"
      "                       [--executions batched,auto] [--interleave 0|1] [--eigen-tolerances 0,0.05]\n"
      "                       [--ndb-polynomials newton-schulz,minimax3,minimax5] [--minimax-interval-min 1e-6]\n"
      "                       [--tf32 0|1] [--newton-steps 10,8] [--ndb-evaluations matmuls,eigh,auto]\n"
      "                       [--preconditioning-precisions fp32,bf16] [--weight-decay 0]\n"
      "                       [--workspace-limits 0.1,0,67108864] [--state-precisions fp32,bf16]\n"
      "                       (--interleave 1: all configurations step in turns, for paired ratios;\n"
      "                        --eigen-tolerances: EVD once per eigen_refresh_tolerance, 0 = eigh every time,\n"
      "                        its roots line counts the eigenbases kept, warm-started and recomputed;\n"
      "                        --ndb-polynomials: NDB once per step polynomial; --ndb-evaluations: NDB (and\n"
      "                        --methods auto's NDB trial) by its matmul iteration (the default here), by eigh of\n"
      "                        its function of the eigenvalues, and/or as the library's default 'auto' (eigh on\n"
      "                        a CPU in fp32); --newton-steps: CN and NDB once per Newton step count;\n"
      "                        --methods auto: RootMethod::Auto, which reports its choice and trials;\n"
      "                        --preconditioning-precisions: once per precision of L̄ Ĝ R̄, labelled\n"
      "                        'pc bf16', its floor at the bf16 ceiling;\n"
      "                        --weight-decay: every optimizer's weight decay (0: none for DASH,\n"
      "                        LibTorch's default 0.01 for AdamW);\n"
      "                        --workspace-limits: DASH once per workspace_limit (a fraction of the\n"
      "                        state in (0, 1), bytes from 1 on, 0: none); 'peak MB' is the largest\n"
      "                        peak of a timed step's temporaries, 'work MB' what is kept across steps;\n"
      "                        --state-precisions: DASH once per storage precision of its roots and\n"
      "                        moments (root_ and moment_precision; factors stay fp32), labelled\n"
      "                        'roots+moments bf16';\n"
      "                        --tf32 1 (solvers, step): float32 matmuls may run as TF32 on GPUs)\n"
      "       dash-bench distributed [--preset llama-tiny] [--layers N] [--block 256] [--frequency 10]\n"
      "                       [--method ndb] [--scaling multi-pi] [--communication fp32|bf16|fp16]\n"
      "                       [--schemes replicated,zero] [--nproc 1] [--warmup 2] [--steps 20]\n"
      "                       [--one-process-memory 0|1] [--json PATH]\n"
      "                       (each scheme's step time, bytes each rank sent over loopback per step,\n"
      "                       rank 0's gradient, state, workspace and peak memory; the schemes\n"
      "                       alternate in rounds of 5 steps; replicated includes the gradient\n"
      "                       all-reduce DDP would do; --one-process-memory 1: rank 0 also\n"
      "                       reports one process's memory for the whole model)\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || dash::bench::asks_for_help({argv + 1, argv + argc})) {
    std::cout << usage;
    return 0;
  }
  try {
    if (command == "solvers") {
      return dash::bench::run_solver_bench(args);
    }
    if (command == "accuracy") {
      return dash::bench::run_accuracy_bench(args);
    }
    if (command == "step") {
      return dash::bench::run_step_bench(args);
    }
    if (command == "distributed") {
      return dash::bench::run_distributed_bench(args);
    }
    std::cerr << "dash-bench: unknown command '" << command << "'\n" << usage;
    return 2;
  } catch (const std::invalid_argument& error) {
    std::cerr << "dash-bench: " << error.what() << "\n" << usage;
    return 2;
  } catch (const c10::Error& error) {
    std::cerr << "dash-bench: " << error.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "dash-bench: " << error.what() << "\n";
    return 1;
  }
}
