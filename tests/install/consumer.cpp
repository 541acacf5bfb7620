// Parses a spec and generates its source through the installed headers and library; with a
// path argument, writes the source there for compile_emitted to build.
#include <cstdio>
#include <fstream>

#include <ropejit/runtime.h>
#include <ropejit/source.h>

int main(int argc, char** argv) {
  const ropejit::Spec spec = ropejit::parse_spec(R"({"name": "consumer", "head_dim": 64, "num_q_heads": 4,
    "num_kv_heads": 2, "layout": "neox", "dtype": "bf16", "max_position_embeddings": 4096,
    "rope": {"rope_type": "default", "rope_theta": 10000}})");
  const auto source = ropejit::generate_source(ropejit::make_plan(spec, ropejit::default_config(spec)));
  std::printf("consumer: ropejit %s, %zu bytes of source, hash %s\n", ropejit::version(), source.text.size(),
              source.hash.hex().c_str());
  if (argc > 1) {
    std::ofstream out(argv[1], std::ios::binary);
    out << source.text;
    if (!out.flush()) {
      std::fprintf(stderr, "consumer: cannot write %s\n", argv[1]);
      return 1;
    }
  }
  return source.text.empty() ? 1 : 0;
}
