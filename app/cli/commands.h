// The `iwb` subcommands; each lives in its own cmd_*.cpp and returns a process exit status.
#pragma once

namespace iwb::cli {

// argv[0] is the subcommand name; options follow.
int run_info(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_devices(int argc, char** argv);
int run_run(int argc, char** argv);
int run_probe(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_batch_bench(int argc, char** argv);
int run_spec_bench(int argc, char** argv);
int run_profile_overhead(int argc, char** argv);
int run_models(int argc, char** argv);
int run_synth(int argc, char** argv);
int run_quantize(int argc, char** argv);
int run_eval(int argc, char** argv);
int run_logits(int argc, char** argv);
int run_imatrix(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_bench_serve(int argc, char** argv);

}  // namespace iwb::cli
