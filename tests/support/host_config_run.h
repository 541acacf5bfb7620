#pragma once
// Runs one config's kernel of a spec on the host backend over a shared workload, returning the
// bytes of every buffer after the launch: configs that must agree bit for bit (how heads are
// spread over threads, whether a block shares its angles) are compared on the same inputs.
#include <initializer_list>
#include <string>
#include <vector>

#include "ropejit/internal/host_jit.h"
#include "launch/launch_args.h"  // private: check_launch and bind_buffers give every config the same params
#include "ropejit/config.h"
#include "ropejit/source.h"
#include "support/repo_paths.h"
#include "ropejit/internal/workload.h"

namespace ropejit::test {

/// A spec under comparison and what the failure messages call it.
struct SpecCase {
  std::string what;
  Spec spec;
};

/// The shipped specs/<name>.json of each name, called by their names.
inline std::vector<SpecCase> shipped_spec_cases(std::initializer_list<const char*> names) {
  std::vector<SpecCase> out;
  for (const char* name : names) out.push_back({name, load_spec_file(spec_path(name))});
  return out;
}

/// The buffers of `w` after `config`'s kernel ran on copies of them; `grid` > 0 overrides the
/// launch's block count (fewer blocks: the grid-stride loop takes several passes).
inline std::vector<std::string> run_host_config(const Spec& spec, const HostWorkload& w, const Config& config,
                                                unsigned grid = 0) {
  const Source source = generate_source(make_plan(spec, config));
  const auto module = HostModule::compile(source.text, source.entry);
  std::vector<std::string> bytes;
  std::vector<BufferDesc> descs;
  std::vector<void*> ptrs;
  for (const HostBuffer& b : w.buffers) bytes.push_back(b.bytes);
  for (size_t i = 0; i < w.buffers.size(); ++i) {
    descs.push_back(w.buffers[i].desc);
    ptrs.push_back(bytes[i].empty() ? nullptr : bytes[i].data());
  }
  const CheckedLaunch launch =
      check_launch(spec, config.vec, bind_buffers(descs, w.shape, ptrs, w.seq_len, w.from_seq_len), true);
  const LaunchDims dims = launch_dims(spec, config, launch.rows, 1);
  HostLaunchDims host_dims;
  host_dims.grid_x = grid > 0 ? grid : dims.grid;
  host_dims.block_x = dims.block;
  module->launch(host_dims, launch.params);  // a lane missing at a collective throws (deadlock)
  return bytes;
}

}  // namespace ropejit::test
