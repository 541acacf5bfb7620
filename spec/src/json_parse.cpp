#include "json_parse.h"

#include <string>
#include <vector>

#include <fmt/core.h>

#include "ropejit/json_limits.h"

namespace ropejit {

using nlohmann::json;

namespace {

// Builds the DOM (nlohmann's own SAX DOM builder) and tracks where in it the parser is.
class FieldTrackingSax {
 public:
  FieldTrackingSax(json& result, FieldNaming naming) : dom_(result, false), naming_(naming) {}

  bool null() { return value(), dom_.null(); }
  bool boolean(bool v) { return value(), dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return value(), dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(), dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& s) {
    return value(), dom_.number_float(v, s);
  }
  bool string(std::string& v) { return value(), dom_.string(v); }
  bool binary(json::binary_t& v) { return value(), dom_.binary(v); }
  bool start_object(std::size_t n) { return frames_.push_back({false, 0, {}}), dom_.start_object(n); }
  bool key(std::string& k) { return frames_.back().key = k, dom_.key(k); }
  bool end_object() { return close(), dom_.end_object(); }
  bool start_array(std::size_t n) { return frames_.push_back({true, 0, {}}), dom_.start_array(n); }
  bool end_array() { return close(), dom_.end_array(); }

  template <class Exception>
  bool parse_error(std::size_t, const std::string& token, const Exception& error) {
    if (error.id == 406) {  // number overflow: a finite-number violation at a known field
      issue = {field(), token + " is not allowed: must be a finite number (it overflows a double)"};
    } else {
      const std::string what = error.what();
      const auto bracket = what.find("] ");  // drop "[json.exception.parse_error.101] "
      issue = {"", "malformed JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2))};
    }
    return false;
  }

  SpecIssue issue;

 private:
  struct Frame {
    bool array;
    size_t index;
    std::string key;
  };
  // A scalar or a closed container completes one array element.
  void value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  void close() {
    frames_.pop_back();
    value();
  }
  std::string field() const {
    std::string out;
    for (const auto& frame : frames_) {
      if (naming_ == FieldNaming::key_path) {
        out += frame.array ? "[" + std::to_string(frame.index) + "]"
                           : (out.empty() ? "" : ".") + frame.key;
        continue;
      }
      const std::string token = frame.array ? std::to_string(frame.index) : frame.key;
      out += "/";
      for (char c : token) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    }
    return out;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  FieldNaming naming_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json_reporting_field(std::string_view text, FieldNaming naming) {
  if (auto problem = json_text_problem(text)) throw SpecError({{"", *problem}});
  json document;
  FieldTrackingSax sax(document, naming);
  if (!json::sax_parse(text.begin(), text.end(), &sax)) throw SpecError({sax.issue});
  return document;
}

}  // namespace ropejit
