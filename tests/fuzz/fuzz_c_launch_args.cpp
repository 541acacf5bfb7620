// libFuzzer target: the launch argument checks behind ropejit_kernel_launch, with fuzzed
// ropejit_args. The fuzz build has no backend (no host JIT, no GPU), so no kernel object exists;
// the target runs what ropejit_kernel_launch runs before a launch: the struct_size check of the
// C API (c_api::check_struct_size, older callers' sizes included), the completion of a shorter
// struct with ropejit_args_init's defaults, and check_launch (runtime/src/launch/launch_args.h), which
// KernelVariant::prepare calls with the backend's host_memory flag.
//
// Input: byte 0 picks the spec (specs/*.json, then kExtraSpecs), byte 1 the mode (bits 0-1), the
// vector width (bits 2-4) and the struct_size (bits 5-7: this header's, an older release's, or a
// raw 8-byte value read from the input); then
//   mode 0 (raw):    the bytes of ropejit_args after struct_size, checked as device memory;
//   mode 1, 3:       a launch shape, a well-formed ropejit_args bound for it (launch_buffers),
//                    then (field number, 8-byte value) overwrites; checked as device memory;
//   mode 2 (host):   a small launch shape with real index arrays (positions, cu_seqlens,
//                    start_pos, slot_mapping, block_tables, new positions) of exactly the documented sizes,
//                    then (array, element, value) overwrites; checked as host memory, so the
//                    checks read those arrays (ASan sees any read past them).
// Data pointers (q, k, v, outputs, caches, bias, norm weights) point into a PROT_NONE arena:
// the checks must never read them, and this harness never dereferences a fuzzed pointer.
// Promises checked: a refused launch throws Error(invalid_argument) (or unsupported for a
// struct_size from a newer header) naming a real ropejit_args field; an accepted launch leaves
// every field that launch_fields calls unused (shape fields excepted) at its default and every
// required pointer set when num_tokens > 0; ropejit_spec_launch_field (C) agrees with
// launch_fields; bytes_moved of an accepted shape is an Error or >= 0.
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "ropejit/internal/c_api_guard.h"
#include "launch/args_fields.h"
#include "launch/launch_args.h"
#include "ropejit/config.h"
#include "ropejit/error.h"
#include "ropejit/introspect.h"
#include "ropejit/ropejit.h"
#include "ropejit/runtime.h"
#include "ropejit/spec.h"

using ropejit::fuzz::finding;

namespace {

// Forms the shipped specs lack: varlen with separate outputs and dynamic NTK (seq_len needed),
// offset positions, paged_kv with block_tables and q_out, paged_kv FP8 e5m2 with offset, QK-norm.
constexpr const char* kExtraSpecs[] = {
    R"({"name":"fz-varlen-dynamic","layout":"neox","head_dim":64,"num_q_heads":4,"num_kv_heads":2,"dtype":"fp16",
        "max_position_embeddings":2048,"rope":{"rope_type":"dynamic","rope_theta":10000.0,"factor":2.0},
        "io":{"input":"separate","output":"separate","copy_v":true,"positions":"varlen"}})",
    R"({"name":"fz-offset-packed","layout":"neox","head_dim":128,"num_q_heads":8,"num_kv_heads":8,"dtype":"fp32",
        "max_position_embeddings":4096,"rope":{"rope_type":"default","rope_theta":10000.0},
        "io":{"input":"packed_qkv","output":"inplace","positions":"offset"}})",
    R"({"name":"fz-paged-block-tables","layout":"neox","head_dim":128,"num_q_heads":16,"num_kv_heads":4,"dtype":"bf16",
        "max_position_embeddings":8192,"rope":{"rope_type":"default","rope_theta":10000.0},
        "io":{"input":"separate","output":"paged_kv","copy_v":true,"positions":"varlen","cache_layout":"hnd",
              "cache_dtype":"auto","cache_index":"block_tables","page_size":16,"q_output":"separate"}})",
    R"({"name":"fz-paged-fp8-offset","layout":"neox","head_dim":64,"num_q_heads":8,"num_kv_heads":8,"dtype":"fp16",
        "max_position_embeddings":4096,"rope":{"rope_type":"default","rope_theta":10000.0},
        "io":{"input":"packed_qkv","output":"paged_kv","copy_v":true,"positions":"offset","cache_layout":"hnd",
              "cache_dtype":"fp8_e5m2","cache_index":"slot_mapping","page_size":8}})",
    R"({"name":"fz-qknorm-bias","head_dim":64,"num_q_heads":8,"num_kv_heads":2,"dtype":"bf16","layout":"interleaved",
        "max_position_embeddings":4096,"rope":{"rope_type":"default","rope_theta":10000.0},
        "io":{"input":"separate","output":"inplace","qkv_bias":true,"positions":"explicit"},
        "qk_norm":{"type":"rmsnorm","eps":1e-6,"weight":"per_head","scope":"head"}})",
};

// One ropejit_args field as the C API's layout table lists it.
struct ArgField {
  std::string name;
  size_t offset = 0, size = 0;
};

// A spec the launches are checked against, its valid vector widths and its launch fields.
struct Case {
  ropejit::Spec spec;
  std::string json;
  std::vector<int> vecs;
  std::vector<ropejit::LaunchField> fields;
};

// Every ropejit_args field (struct_size included) with its offset and size, from the C API.
const std::vector<ArgField>& arg_fields() {
  static const std::vector<ArgField> fields = [] {
    std::vector<ArgField> out;
    size_t offset = 0;
    for (size_t i = 0; const char* name = ropejit_struct_field("ropejit_args", i, &offset); ++i)
      out.push_back({name, offset, 0});
    for (size_t i = 0; i < out.size(); ++i)
      out[i].size = std::min<size_t>(8, (i + 1 < out.size() ? out[i + 1].offset : sizeof(ropejit_args)) - out[i].offset);
    return out;
  }();
  return fields;
}

const ArgField* arg_field(std::string_view name) {
  for (const ArgField& f : arg_fields())
    if (f.name == name) return &f;
  return nullptr;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Case make_case(const std::string& json) {
  Case c;
  c.json = json;
  c.spec = ropejit::parse_spec(json);
  for (int vec : {1, 2, 4, 8}) {
    ropejit::Config config = ropejit::default_config(c.spec);
    config.vec = vec;
    if (!ropejit::config_problem(c.spec, config)) c.vecs.push_back(vec);
  }
  if (c.vecs.empty()) c.vecs.push_back(ropejit::default_config(c.spec).vec);
  c.fields = ropejit::launch_fields(c.spec);
  // The C introspection lists the same fields with the same use.
  for (size_t i = 0;; ++i) {
    ropejit_launch_field f{};
    f.struct_size = sizeof f;
    if (ropejit_spec_launch_field(json.c_str(), i, &f) != ROPEJIT_STATUS_OK) finding(ropejit_last_error());
    if (!f.name) {
      if (i != c.fields.size()) finding("ropejit_spec_launch_field lists another number of fields");
      break;
    }
    if (i >= c.fields.size() || c.fields[i].name != f.name || int(c.fields[i].use) != int(f.use))
      finding(std::string("ropejit_spec_launch_field disagrees with launch_fields at ") + f.name);
  }
  return c;
}

// The shipped specs (sorted by file name, so byte 0 means the same spec on every machine) and the extras.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(ROPEJIT_SOURCE_DIR "/specs"))
      if (e.path().extension() == ".json" && e.path().filename() != "schema.json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<Case> out;
    for (const auto& f : files) out.push_back(make_case(read_text(f)));
    for (const char* json : kExtraSpecs) out.push_back(make_case(json));
    return out;
  }();
  return all;
}

// Address space no access is allowed to: where every data pointer points.
char* arena() {
  static char* base = [] {
    void* p = ::mmap(nullptr, size_t(1) << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) finding("mmap of the PROT_NONE arena failed");
    return static_cast<char*>(p);
  }();
  return base;
}

// Arrays the host-memory checks read (positions, cu_seqlens, start_pos, slot_mapping, block_tables,
// new positions): every buffer but the data and the value tables (bias, norm weights, a caller's
// cos/sin rows), so a new kind is covered.
bool is_index_array(const ropejit::BufferDesc& b) {
  using K = ropejit::BufferKind;
  return !b.is_data() && b.kind != K::bias && b.kind != K::norm_weight && b.kind != K::table;
}

// A valid value for element `i` of an index array of a launch at `shape` (host mode's start).
int64_t valid_element(const ropejit::Spec& spec, ropejit::BufferKind kind, const ropejit::LaunchShape& shape, int64_t i) {
  using K = ropejit::BufferKind;
  switch (kind) {
    case K::positions:
    case K::new_positions: return i % std::max<int64_t>(shape.tokens, 1);
    case K::cu_seqlens: return shape.batch ? std::min<int64_t>(shape.tokens, i * ((shape.tokens + shape.batch - 1) / shape.batch)) : 0;
    case K::start_pos: return 0;
    case K::slot_mapping: return i;
    case K::block_tables: return spec.io.page_size ? i % std::max<int64_t>(shape.cache_pages, 1) : 0;
    default: return 0;
  }
}

void store_element(std::vector<char>& bytes, int element_bytes, int64_t i, int64_t value) {
  if (element_bytes == 4) {
    const int32_t v = int32_t(value);
    std::memcpy(bytes.data() + i * 4, &v, 4);
  } else {
    std::memcpy(bytes.data() + i * 8, &value, 8);
  }
}

// A refusal: invalid_argument naming a real field, or unsupported for a newer header's struct_size.
void check_refusal(const ropejit::Error& e, bool struct_size_step) {
  if (struct_size_step && (e.code() == ropejit::Status::invalid_argument || e.code() == ropejit::Status::unsupported))
    return;
  if (e.code() != ropejit::Status::invalid_argument)
    finding(std::string("a launch check threw status ") + ropejit::status_name(e.code()) + ": " + e.what());
  if (!arg_field(e.field())) finding("a refused launch names no ropejit_args field: \"" + e.field() + "\": " + e.what());
}

// After acceptance: unused fields (shape fields excepted) at their defaults, required pointers set.
void check_accepted(const Case& c, const ropejit_args& a, const ropejit::CheckedLaunch& checked) {
  for (const ropejit::LaunchField& f : c.fields) {
    const ropejit::ArgsField* field = ropejit::find_args_field(f.name);
    if (!field || !arg_field(f.name)) finding("launch_fields names a field the C layout lacks: " + std::string(f.name));
    const bool set = !ropejit::field_is_default(*field, a);
    if (f.use == ropejit::FieldUse::unused && set && !ropejit::is_shape_field(f.name))
      finding("a launch was accepted with the unused field " + std::string(f.name) + " set (" + c.spec.name + ")");
    if (f.use == ropejit::FieldUse::required && !set && field->kind == ropejit::ArgsFieldKind::pointer &&
        a.num_tokens > 0)
      finding("a launch was accepted without the required " + std::string(f.name) + " (" + c.spec.name + ")");
  }
  if (checked.rows < 0) finding("check_launch gave negative rows");
  if (c.spec.io.output != ropejit::OutputForm::padded_bhsd && checked.rows != a.num_tokens)
    finding("check_launch rows differ from num_tokens");
  try {
    if (ropejit::bytes_moved(c.spec, a.num_tokens, a.batch, a.max_seq_len) < 0) finding("bytes_moved < 0");
  } catch (const ropejit::Error& e) {
    if (e.code() != ropejit::Status::invalid_argument) finding(std::string("bytes_moved: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)cases();  // parse every spec once, before the first input (and fail early if one breaks)
  (void)arena();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ropejit::fuzz::ByteReader in(data, size);
  const Case& c = cases()[in.take<uint8_t>() % cases().size()];
  const uint8_t flags = in.take<uint8_t>();
  const int mode = flags & 3;
  const int vec = c.vecs[((flags >> 2) & 7) % c.vecs.size()];
  const int size_choice = (flags >> 5) & 7;
  const bool host = mode == 2;

  ropejit_args args;
  ropejit_args_init(&args);
  std::vector<std::vector<char>> arrays;  // host mode's index arrays, alive through the check
  if (mode == 0) {
    const std::string_view rest = in.rest();
    std::memcpy(reinterpret_cast<char*>(&args) + sizeof(size_t), rest.data(),
                std::min(rest.size(), sizeof(args) - sizeof(size_t)));
  } else {
    ropejit::LaunchShape shape;
    shape.tokens = host ? in.take<uint8_t>() : in.take<uint32_t>();
    shape.batch = host ? in.take<uint8_t>() % 9 : in.take<uint8_t>();
    shape.max_seq_len = host ? in.take<uint8_t>() : in.take<uint16_t>();
    shape.positions_type = (in.take<uint8_t>() & 1) ? ropejit::PositionsType::int64 : ropejit::PositionsType::int32;
    shape.cache_pages = host ? in.take<uint8_t>() : in.take<uint16_t>();
    shape.max_blocks_per_seq = host ? in.take<uint8_t>() % 17 : in.take<uint8_t>();
    const bool fp8 = c.spec.io.cache_dtype != ropejit::CacheDType::auto_;
    shape.k_scale = shape.v_scale = fp8 ? 1.0f : 0.0f;
    // Read only for a cos_sin_cache spec, so the other specs' corpus inputs keep their meaning.
    if (ropejit::caller_cos_sin(c.spec)) shape.cos_sin_rows = host ? in.take<uint8_t>() : in.take<uint16_t>();
    const int64_t seq_len = in.take<int32_t>();
    const int64_t from_seq_len = in.take<int32_t>();  // op rerotate: the length the keys were written at
    std::vector<ropejit::BufferDesc> buffers;
    std::vector<void*> ptrs;
    try {
      buffers = ropejit::launch_buffers(c.spec, shape);
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (host && is_index_array(buffers[i])) {
          const int64_t count = buffers[i].rows * buffers[i].row_stride;
          std::vector<char> bytes(size_t(count * buffers[i].element_bytes) + 1);  // +1: never a null data()
          for (int64_t e = 0; e < count; ++e)
            store_element(bytes, buffers[i].element_bytes, e, valid_element(c.spec, buffers[i].kind, shape, e));
          arrays.push_back(std::move(bytes));
          ptrs.push_back(arrays.back().data());
        } else {
          ptrs.push_back(arena() + (i + 1) * 4096);
        }
      }
      args = ropejit::bind_buffers(buffers, shape, ptrs, seq_len, from_seq_len);
    } catch (const ropejit::Error&) {
      return 0;  // a shape whose sizes overflow: nothing to launch
    }
    if (host) {
      // (array, element, value) overwrites inside the arrays' documented sizes.
      while (in.remaining() >= 11 && !arrays.empty()) {
        const size_t which = in.take<uint8_t>() % arrays.size();
        size_t bi = 0;
        for (size_t i = 0, seen = 0; i < buffers.size(); ++i)
          if (is_index_array(buffers[i]) && seen++ == which) bi = i;
        const int esize = buffers[bi].element_bytes;
        const int64_t count = int64_t(arrays[which].size() - 1) / esize;
        const uint16_t element = in.take<uint16_t>();
        const int64_t value = in.take<int64_t>();
        if (count > 0) store_element(arrays[which], esize, element % count, value);
      }
    } else {
      // (field number, value) overwrites of any field but struct_size.
      while (in.remaining() >= 9) {
        const ArgField& f = arg_fields()[1 + in.take<uint8_t>() % (arg_fields().size() - 1)];
        const uint64_t value = in.take<uint64_t>();
        std::memcpy(reinterpret_cast<char*>(&args) + f.offset, &value, f.size);
      }
    }
  }
  // 0: this header's size; 1-6: an older generation's; 7: raw bytes, whose top bit picks any generation.
  constexpr size_t kOlder = ropejit::kArgsOlderSizes.size();
  const auto older = [](uint64_t i) { return ropejit::kArgsOlderSizes[size_t(i % kOlder)]; };
  if (size_choice == 0) {
    args.struct_size = sizeof(ropejit_args);
  } else if (size_choice < 7) {
    args.struct_size = older(uint64_t(size_choice - 1));
  } else {
    const uint64_t raw = in.take<uint64_t>();
    args.struct_size = (raw >> 63) ? older(raw) : size_t(raw);
  }

  // ropejit_kernel_launch: the struct_size check, then the caller's bytes over the defaults.
  try {
    ropejit::c_api::check_struct_size(args.struct_size, sizeof(ropejit_args), "ropejit_args",
                                      ropejit::kArgsOlderSizes.data(), ropejit::kArgsOlderSizes.size());
  } catch (const ropejit::Error& e) {
    check_refusal(e, true);
    return 0;
  }
  ropejit::Args full;
  std::memcpy(static_cast<ropejit_args*>(&full), &args, args.struct_size);
  static const bool trace = std::getenv("ROPEJIT_FUZZ_TRACE") != nullptr;  // replaying: say what happened
  try {
    const ropejit::CheckedLaunch checked = ropejit::check_launch(c.spec, vec, full, host);
    if (trace) std::fprintf(stderr, "%s vec %d %s: accepted, %lld rows\n", c.spec.name.c_str(), vec,
                            host ? "host" : "device", static_cast<long long>(checked.rows));
    check_accepted(c, full, checked);
  } catch (const ropejit::Error& e) {
    if (trace) std::fprintf(stderr, "%s vec %d %s: %s\n", c.spec.name.c_str(), vec, host ? "host" : "device", e.what());
    check_refusal(e, false);
  }
  return 0;
}
