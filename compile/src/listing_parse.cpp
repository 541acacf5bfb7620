// SASS and PTX listings → InstrCounts: both are read into one instruction list (opcode,
// register reads and writes, memory kind and width, branch target), then counted the same way.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ropejit/kernel_stats.h"

namespace ropejit {

void WidthCounts::add(int bits) {
  for (size_t i = 0; i < kBits.size(); ++i)
    if (kBits[i] == bits) ++count[i];
}

int WidthCounts::total() const {
  int n = 0;
  for (int c : count) n += c;
  return n;
}

int WidthCounts::of(int bits) const {
  for (size_t i = 0; i < kBits.size(); ++i)
    if (kBits[i] == bits) return count[i];
  return 0;
}

int WidthCounts::other_than(int bits) const { return total() - of(bits); }

namespace {

enum class Mem { none, data_load, ro_load, data_store, generic_load, generic_store, local, shared };
enum class Fp64 { none, arith, convert };

struct Instr {
  std::string op;                 // opcode with its qualifiers
  std::vector<std::string> reads;   // registers read
  std::vector<std::string> writes;  // registers written
  Mem mem = Mem::none;
  int bits = 0;                   // access width of a memory instruction
  Fp64 fp64 = Fp64::none;
  std::string target;             // branch target (label or hex address), else empty
  std::string callee;             // CALL's target label (a function, or a label in the body), else empty
  bool exit = false;
  bool guarded = false;           // under a predicate (@P0): it may not run
  bool padding = false;           // NOP: alignment filler, never issued
  bool barrier = false;           // a block barrier (BAR.SYNC, bar.sync / barrier.sync)
};

struct Listing {
  std::vector<Instr> code;
  std::map<std::string, size_t> labels;  // label or address → index of its instruction
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(std::string(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

// Operands split at top-level commas: PTX vectors ({%r1, %r2}) and brackets hold commas too.
std::vector<std::string> operands_of(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '{' || c == '[' || c == '(') ++depth;
    if (c == '}' || c == ']' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

bool has_token(const std::vector<std::string>& tokens, std::string_view t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

// "0x01580" and "1580" name the same SASS address.
std::string address_key(std::string hex) {
  if (hex.rfind("0x", 0) == 0) hex = hex.substr(2);
  hex.erase(0, std::min(hex.find_first_not_of('0'), hex.size() - 1));
  for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "@" + hex;
}

// --- SASS ---------------------------------------------------------------------------------

// The general registers an operand names: R12 (RZ and uniform URn are not), `width` of them
// from each (a 64-bit pair "R10.64", or a 128-bit store's data).
std::vector<std::string> sass_registers(const std::string& operand, int width) {
  std::vector<std::string> regs;
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 'R' || (i > 0 && (std::isalnum(static_cast<unsigned char>(operand[i - 1])) ||
                                        operand[i - 1] == '_')))
      continue;
    size_t j = i + 1;
    while (j < operand.size() && std::isdigit(static_cast<unsigned char>(operand[j]))) ++j;
    if (j == i + 1) continue;
    const int first = std::stoi(operand.substr(i + 1, j - i - 1));
    const int n = operand.compare(j, 3, ".64") == 0 ? std::max(width, 2) : width;
    for (int k = 0; k < n; ++k) regs.push_back("R" + std::to_string(first + k));
    i = j;
  }
  return regs;
}

int sass_width(const std::vector<std::string>& q) {
  if (has_token(q, "U8") || has_token(q, "S8")) return 8;
  if (has_token(q, "U16") || has_token(q, "S16")) return 16;
  if (has_token(q, "64")) return 64;
  if (has_token(q, "128")) return 128;
  if (has_token(q, "256")) return 256;
  return 32;
}

void classify_sass(Instr& in, const std::vector<std::string>& operands) {
  const std::vector<std::string> q = split(in.op, '.');
  const std::string& base = q[0];
  static const std::map<std::string, Mem> kMem = {
      {"LDG", Mem::data_load}, {"STG", Mem::data_store}, {"LD", Mem::generic_load},
      {"ST", Mem::generic_store}, {"LDL", Mem::local}, {"STL", Mem::local},
      {"LDS", Mem::shared}, {"STS", Mem::shared}, {"LDSM", Mem::shared}};
  if (auto it = kMem.find(base); it != kMem.end()) {
    in.mem = it->second;
    if (in.mem == Mem::data_load && has_token(q, "CONSTANT")) in.mem = Mem::ro_load;
    in.bits = sass_width(q);
  }
  static const std::set<std::string> kFp64Arith = {"DFMA", "DADD", "DMUL", "DSETP", "DMNMX"};
  static const std::set<std::string> kConvert = {"F2F", "F2I", "I2F", "FRND"};
  if (kFp64Arith.count(base)) in.fp64 = Fp64::arith;
  else if (kConvert.count(base) && has_token(q, "F64")) in.fp64 = Fp64::convert;
  in.exit = base == "EXIT";
  in.padding = base == "NOP";
  in.barrier = base == "BAR" && has_token(q, "SYNC");

  const bool store = in.mem == Mem::data_store || in.mem == Mem::generic_store ||
                     (in.mem == Mem::local && base == "STL") || (in.mem == Mem::shared && base[0] == 'S') ||
                     base == "RED";
  const int data_width = (in.mem != Mem::none ? std::max(1, in.bits / 32) : (in.fp64 == Fp64::arith ? 2 : 1));
  for (size_t i = 0; i < operands.size(); ++i) {
    const bool dest = i == 0 && !store;
    // An address operand ([R42.64+0x80]) is read at its own width; the data at the access width.
    const bool address = operands[i].find('[') != std::string::npos;
    auto regs = sass_registers(operands[i], address ? 1 : data_width);
    auto& into = dest ? in.writes : in.reads;
    into.insert(into.end(), regs.begin(), regs.end());
  }
}

Listing read_sass(std::string_view text) {
  Listing l;
  for (const std::string& raw : split(text, '\n')) {
    const std::string line = trim(raw);
    if (line.empty()) continue;
    if (line.rfind("/*", 0) != 0) {  // a label: ".L_x_24:" (nvdisasm)
      if (line.back() == ':' && line.find(' ') == std::string::npos)
        l.labels[line.substr(0, line.size() - 1)] = l.code.size();
      continue;
    }
    const size_t close = line.find("*/");
    const size_t semi = line.find(';', close);
    if (close == std::string::npos || semi == std::string::npos) continue;  // encoding-only line
    const std::string address = line.substr(2, close - 2);
    if (address.empty() || !std::all_of(address.begin(), address.end(),
                                         [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      continue;
    std::string body = trim(line.substr(close + 2, semi - close - 2));
    if (body.empty()) continue;
    const bool guarded = body[0] == '@';
    if (guarded) body = trim(body.substr(body.find(' ') == std::string::npos ? body.size() : body.find(' ')));
    const size_t sp = body.find(' ');
    Instr in;
    in.guarded = guarded;
    in.op = body.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : body.substr(sp + 1);
    if (in.op.rfind("BRA", 0) == 0) {
      const size_t lbl = rest.find(".L_");
      if (lbl != std::string::npos) {
        size_t e = lbl + 3;
        while (e < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[e])) || rest[e] == '_')) ++e;
        in.target = rest.substr(lbl, e - lbl);
      } else if (const size_t hx = rest.find("0x"); hx != std::string::npos) {
        in.target = address_key(rest.substr(hx, rest.find_first_of(" ;,", hx) - hx));
      }
    } else if (in.op.rfind("CALL", 0) == 0) {
      const size_t open = rest.find("`("), close = rest.find(')', open);
      if (open != std::string::npos && close != std::string::npos) in.callee = rest.substr(open + 2, close - open - 2);
    } else {
      classify_sass(in, operands_of(rest));
    }
    l.labels[address_key(address)] = l.code.size();
    l.code.push_back(std::move(in));
  }
  return l;
}

// --- PTX ----------------------------------------------------------------------------------

std::vector<std::string> ptx_registers(const std::string& operand) {
  std::vector<std::string> regs;
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != '%') continue;
    size_t j = i + 1;
    while (j < operand.size() && (std::isalnum(static_cast<unsigned char>(operand[j])) || operand[j] == '_')) ++j;
    const std::string name = operand.substr(i, j - i);
    // %r12, %rd3, %f7, %p1; not special registers (%tid.x) or parameter names.
    if (name.size() > 2 && std::isdigit(static_cast<unsigned char>(name.back())) &&
        name.rfind("%tid", 0) != 0 && name.rfind("%ctaid", 0) != 0 && name.rfind("%ntid", 0) != 0 &&
        name.rfind("%nctaid", 0) != 0)
      regs.push_back(name);
    i = j;
  }
  return regs;
}

int ptx_width(const std::vector<std::string>& q) {
  int lanes = 1, bits = 0;
  for (const std::string& t : q) {
    if (t == "v2" || t == "v4" || t == "v8") lanes = t[1] - '0';
    else if (t == "f16x2" || t == "bf16x2") bits = 32;
    else if (t.size() >= 2 && std::string("bsuf").find(t[0]) != std::string::npos &&
             std::all_of(t.begin() + 1, t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      bits = std::stoi(t.substr(1));
  }
  return lanes * bits;
}

void classify_ptx(Instr& in, const std::vector<std::string>& operands) {
  const std::vector<std::string> q = split(in.op, '.');
  const std::string& base = q[0];
  if (base == "ld" || base == "ldu" || base == "st") {
    const bool load = base != "st";
    const auto space = std::find_if(q.begin() + 1, q.end(), [](const std::string& t) {
      return t == "global" || t == "local" || t == "param" || t == "const" || t.rfind("shared", 0) == 0;
    });
    if (space == q.end()) in.mem = load ? Mem::generic_load : Mem::generic_store;
    else if (*space == "global")
      in.mem = !load ? Mem::data_store : (base == "ldu" || has_token(q, "nc") ? Mem::ro_load : Mem::data_load);
    else if (*space == "local") in.mem = Mem::local;
    else if (space->rfind("shared", 0) == 0) in.mem = Mem::shared;
    if (in.mem != Mem::none) in.bits = ptx_width(q);
  }
  in.barrier = (base == "bar" || base == "barrier") && has_token(q, "sync");
  static const std::set<std::string> kArith = {"fma", "add", "sub", "mul", "mad", "setp", "min", "max"};
  if (has_token(q, "f64")) {
    if (kArith.count(base)) in.fp64 = Fp64::arith;
    else if (base == "cvt") in.fp64 = Fp64::convert;
  }
  in.exit = base == "ret" || base == "exit";
  const bool store = base == "st" || base == "red" || base == "atom";
  for (size_t i = 0; i < operands.size(); ++i) {
    auto regs = ptx_registers(operands[i]);
    auto& into = (i == 0 && !store) ? in.writes : in.reads;
    into.insert(into.end(), regs.begin(), regs.end());
  }
}

// A .func's name: ".func (.param .b32 func_retval0) NAME(" or ".func NAME(".
std::string ptx_function_name(const std::string& line) {
  size_t at = line.find_first_not_of(" \t", 5);
  if (at != std::string::npos && line[at] == '(') at = line.find_first_not_of(" \t", line.find(')', at) + 1);
  if (at == std::string::npos) return "";
  const size_t end = line.find_first_of(" \t(;", at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

Listing read_ptx(std::string_view text) {
  Listing l;
  std::string function;  // a .func whose body's `{` comes next
  std::string call;      // a call statement spread over lines (NVVM puts each operand on its own)
  for (const std::string& raw : split(text, '\n')) {
    std::string line = raw.substr(0, raw.find("//"));
    line.erase(std::remove(line.begin(), line.end(), '\0'), line.end());
    line = trim(line);
    if (line.empty()) continue;
    if (line[0] == '$' && line.back() == ':') {  // $L__BB0_2:
      l.labels[line.substr(0, line.size() - 1)] = l.code.size();
      continue;
    }
    if (line.rfind(".func", 0) == 0) function = ptx_function_name(line);
    if (line == ";") {  // the end of a prototype: no body, no instruction
      function.clear();
      continue;
    }
    if (line == "{" && !function.empty()) {
      l.labels[function] = l.code.size();
      function.clear();
    }
    const size_t op_at = line[0] == '@' ? line.find_first_not_of(" \t", line.find_first_of(" \t")) : 0;
    if ((op_at != std::string::npos && line.compare(op_at, 4, "call") == 0) || !call.empty()) {
      call += line + " ";
      if (line.back() != ';') continue;
      line = trim(call);
      call.clear();
    }
    if (line[0] == '.' || line[0] == '{' || line[0] == '}' || line.back() != ';') continue;
    std::string body = trim(line.substr(0, line.size() - 1));
    const bool guarded = body[0] == '@';
    if (guarded) body = trim(body.substr(std::min(body.find_first_of(" \t"), body.size())));
    const size_t sp = body.find_first_of(" \t");
    Instr in;
    in.guarded = guarded;
    in.op = body.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : body.substr(sp + 1);
    if (in.op.rfind("bra", 0) == 0) {
      in.target = trim(rest);
    } else if (in.op.rfind("call", 0) == 0) {  // call.uni (retval0), NAME, (param0, ...)
      for (const std::string& operand : operands_of(rest))
        if (!operand.empty() && operand[0] != '(') {
          in.callee = operand;
          break;
        }
    } else {
      classify_ptx(in, operands_of(rest));
    }
    l.code.push_back(std::move(in));
  }
  return l;
}

// --- counting -----------------------------------------------------------------------------

bool is_qkv_access(const Instr& in) {
  return in.mem == Mem::data_load || in.mem == Mem::data_store || in.mem == Mem::generic_load ||
         in.mem == Mem::generic_store;
}

bool is_return(const Instr& in) { return in.op.rfind("RET", 0) == 0 || in.op.rfind("ret", 0) == 0; }

// A called function (SASS `CALL` to a body that ends in `RET`, placed after the kernel's code;
// PTX `call` of a .func) runs once per call: its instructions weigh the sum of their call sites'
// weights, a call site inside another function at that function's weight. A call whose target
// reaches an unguarded EXIT before a return is no function call (ptxas's call into the kernel's
// own exit path) and is left as it is; a recursive call counts once.
void weigh_callees(const Listing& l, std::vector<double>& w) {
  std::map<size_t, size_t> bodies;              // a function's first instruction -> its return
  std::vector<std::pair<size_t, size_t>> calls;  // (call site, function's first instruction)
  for (size_t i = 0; i < l.code.size(); ++i) {
    const auto it = l.labels.find(l.code[i].callee);
    if (l.code[i].callee.empty() || it == l.labels.end()) continue;
    const size_t first = it->second;
    if (!bodies.count(first)) {  // its return, found once per function
      size_t ret = first;
      while (ret < l.code.size() && !is_return(l.code[ret]) && !(l.code[ret].exit && !l.code[ret].guarded)) ++ret;
      if (ret == l.code.size() || !is_return(l.code[ret])) continue;
      bodies[first] = ret;
    }
    calls.emplace_back(i, first);
  }
  // Every function's weight from the loop weights alone, before any body is scaled.
  std::map<size_t, double> weight;
  std::set<size_t> open;  // functions whose weight is being summed (recursion)
  std::function<double(size_t)> weight_of = [&](size_t first) {
    if (const auto it = weight.find(first); it != weight.end()) return it->second;
    if (!open.insert(first).second) return 1.0;
    double sum = 0;
    for (const auto& [site, callee] : calls) {
      if (callee != first) continue;
      double caller = 1;  // the kernel's body, or the function holding the site
      for (const auto& [f, ret] : bodies)
        if (f <= site && site <= ret) caller = weight_of(f);
      sum += w[site] * caller;
    }
    open.erase(first);
    return weight[first] = sum;
  };
  for (const auto& body : bodies) weight_of(body.first);
  for (const auto& [first, ret] : bodies)
    for (size_t k = first; k <= ret; ++k) w[k] *= weight[first];
}

// Per-item weight of each instruction: the loops inside the outermost one (the grid-stride loop),
// nested or not, in listing order, run `trips[n]` times per item in all (not per trip of a loop
// around them), n the loop's place in the listing, when the listing has as many such loops as
// `trips` names; an instruction weighs its innermost loop's trips. Otherwise every one weighs
// `trips[0]` (the heads loop's: an over-estimate for any shorter loop). A loop that fills shared
// memory without touching q/k/v (the block's shared angles, angles.cuh) weighs `angle_weight` (its
// trips per item; a fraction where only some of a block's warps take it) and is none of them.
// A backward branch over an unguarded EXIT is no loop: it returns from a block placed after the
// kernel's end (ptxas's BRA.DIV fallback of a warp shuffle) into the body.
std::vector<double> item_weights(const Listing& l, const std::vector<int>& trips, double angle_weight,
                                 int& inner_loops) {
  std::vector<int> depth(l.code.size(), 0);
  std::vector<bool> in_angle_loop(l.code.size(), false);
  std::map<size_t, size_t> loops;  // first instruction -> last back branch (a loop's `continue`s merged)
  for (size_t i = 0; i < l.code.size(); ++i) {
    if (l.code[i].target.empty()) continue;
    const auto it = l.labels.find(l.code[i].target);
    if (it == l.labels.end() || it->second >= i) continue;  // forward, or the self-branch trap
    if (std::any_of(l.code.begin() + it->second, l.code.begin() + i,
                    [](const Instr& in) { return in.exit && !in.guarded; }))
      continue;
    bool shared = false, qkv = false;
    for (size_t k = it->second; k <= i; ++k) {
      ++depth[k];
      shared = shared || l.code[k].mem == Mem::shared;
      qkv = qkv || is_qkv_access(l.code[k]);
    }
    if (shared && !qkv)
      for (size_t k = it->second; k <= i; ++k) in_angle_loop[k] = true;
    size_t& last = loops[it->second];
    last = std::max(last, i);
  }
  // The inner loops: inside at least one other loop, not the angle loop; in listing order.
  std::vector<std::pair<size_t, size_t>> inner;
  for (const auto& loop : loops) {
    const size_t first = loop.first, last = loop.second;  // copies: a lambda captures no structured binding in C++17
    const bool nested = std::any_of(loops.begin(), loops.end(), [&](const auto& o) {
      return o.first != first && o.first <= first && last <= o.second;
    });
    if (nested && !in_angle_loop[first]) inner.emplace_back(first, last);
  }
  inner_loops = static_cast<int>(inner.size());
  const bool each_own = inner.size() == trips.size();
  std::vector<double> w(l.code.size());
  for (size_t k = 0; k < w.size(); ++k) {
    int loop_trips = trips.at(0);
    if (each_own) {
      size_t span = SIZE_MAX;  // the innermost loop holding k: the shortest
      for (size_t n = 0; n < inner.size(); ++n)
        if (inner[n].first <= k && k <= inner[n].second && inner[n].second - inner[n].first < span) {
          span = inner[n].second - inner[n].first;
          loop_trips = trips[n];
        }
    }
    w[k] = depth[k] < 2 ? 1.0 : in_angle_loop[k] ? angle_weight : std::max(1, loop_trips);
  }
  weigh_callees(l, w);
  return w;
}

bool is_self_branch(const Listing& l, size_t i) {
  const auto it = l.labels.find(l.code[i].target);
  return !l.code[i].target.empty() && it != l.labels.end() && it->second == i;
}

// Loads issued before an instruction reads a result of one of them, from each load on: the
// most 128-bit loads of any such window, and the most bytes of q/k/v loads (any width).
void loads_in_flight(const Listing& l, InstrCounts& c) {
  auto wide = [](const Instr& in) {
    return (in.mem == Mem::data_load || in.mem == Mem::ro_load || in.mem == Mem::generic_load) && in.bits == 128;
  };
  auto data = [](const Instr& in) { return in.mem == Mem::data_load || in.mem == Mem::generic_load; };
  for (size_t s = 0; s < l.code.size(); ++s) {
    if (!wide(l.code[s]) && !data(l.code[s])) continue;
    std::set<std::string> pending;
    int n = 0, bytes = 0;
    for (size_t k = s; k < l.code.size() && !l.code[k].exit; ++k) {
      const Instr& in = l.code[k];
      if (std::any_of(in.reads.begin(), in.reads.end(), [&](const std::string& r) { return pending.count(r); }))
        break;
      if (!wide(in) && !data(in)) continue;
      n += wide(in);
      bytes += data(in) ? in.bits / 8 : 0;
      pending.insert(in.writes.begin(), in.writes.end());
    }
    if (wide(l.code[s])) c.loads_in_flight = std::max(c.loads_in_flight, n);
    if (data(l.code[s])) c.bytes_in_flight = std::max(c.bytes_in_flight, bytes);
  }
}

// Where a thread's first q/k/v load stands: its index, the first barrier every thread takes (an
// unguarded one), and whether it is issued before any instruction reads a read-only (index) load's
// result, so its round trip overlaps the index loads' (rope.cuh fetch_first_head).
void first_data_load(const Listing& l, InstrCounts& c) {
  std::set<std::string> index_results;
  bool index_used = false;
  for (size_t k = 0; k < l.code.size(); ++k) {
    const Instr& in = l.code[k];
    if (c.first_barrier < 0 && in.barrier && !in.guarded) c.first_barrier = static_cast<int>(k);
    if (c.first_data_load < 0 && (in.mem == Mem::data_load || in.mem == Mem::generic_load)) {
      c.first_data_load = static_cast<int>(k);
      c.data_load_before_index_use = !index_used;
    }
    if (std::any_of(in.reads.begin(), in.reads.end(), [&](const std::string& r) { return index_results.count(r); }))
      index_used = true;
    if (in.mem == Mem::ro_load) index_results.insert(in.writes.begin(), in.writes.end());
  }
}

InstrCounts count(const Listing& l, const std::vector<int>& trips, double angle_weight) {
  InstrCounts c;
  const std::vector<double> w = item_weights(l, trips, angle_weight, c.inner_loops);
  for (size_t i = 0; i < l.code.size(); ++i) {
    const Instr& in = l.code[i];
    if (in.padding || is_self_branch(l, i)) continue;
    ++c.instructions;
    c.per_item += w[i];
    switch (in.mem) {
      case Mem::data_load: c.data_loads.add(in.bits); break;
      case Mem::ro_load: c.readonly_loads.add(in.bits); break;
      case Mem::data_store: c.data_stores.add(in.bits); break;
      case Mem::generic_load: c.generic_loads.add(in.bits); break;
      case Mem::generic_store: c.generic_stores.add(in.bits); break;
      case Mem::local: ++c.local_accesses; break;
      case Mem::shared: ++c.shared_accesses; break;
      case Mem::none: break;
    }
    if (in.fp64 == Fp64::arith) {
      ++c.fp64_arith;
      c.fp64_arith_per_item += w[i];
    } else if (in.fp64 == Fp64::convert) {
      ++c.fp64_convert;
      c.fp64_convert_per_item += w[i];
    }
  }
  loads_in_flight(l, c);
  first_data_load(l, c);
  return c;
}

}  // namespace

InstrCounts count_sass(std::string_view listing, const std::vector<int>& inner_loop_trips, double angle_loop_weight) {
  return count(read_sass(listing), inner_loop_trips, angle_loop_weight);
}

InstrCounts count_ptx(std::string_view ptx, const std::vector<int>& inner_loop_trips, double angle_loop_weight) {
  return count(read_ptx(ptx), inner_loop_trips, angle_loop_weight);
}

}  // namespace ropejit
