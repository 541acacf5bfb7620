// Parses a spec and generates its source through the installed headers and library.
#include <cstdio>

#include <ropejit/runtime.h>
#include <ropejit/source.h>

int main() {
  const ropejit::Spec spec = ropejit::parse_spec(R"({"name": "consumer", "head_dim": 64, "num_q_heads": 4,
    "num_kv_heads": 2, "layout": "neox", "dtype": "bf16", "max_position_embeddings": 4096,
    "rope": {"rope_type": "default", "rope_theta": 10000}})");
  const auto source = ropejit::generate_source(ropejit::make_plan(spec, ropejit::default_config(spec)));
  std::printf("consumer: ropejit %s, %zu bytes of source, hash %s\n", ropejit::version(), source.text.size(),
              source.hash.hex().c_str());
  return source.text.empty() ? 1 : 0;
}
