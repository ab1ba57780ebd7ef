// The first error protobuf's text parser reports, kept for a one-line message. Header-only, for
// the readers of TensorFlow's text formats (GraphDefs, tf2xla configs), which link protobuf;
// support itself does not.
#pragma once

#include <string>

#include <google/protobuf/io/tokenizer.h>

namespace xlens {

// "LINE:COLUMN: message" (1-based, as compilers print them) of the parser's first error.
class FirstTextError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) first_ = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace xlens
