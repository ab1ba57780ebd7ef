// A generator of random, valid HLO modules for differential tests of the compiler against the
// reference evaluator: elementwise chains, broadcasts, reductions over random dimensions,
// transposes, slices, concatenates, pads, reverses, dots, converts between mixed element types,
// dynamic-(update-)slices, reduce-windows, gathers, scatters, iotas, clamps and sorts, ending in
// one array or a tuple. Dynamic starts and gather/scatter indices come in signed and unsigned
// types, past the ends too (u64 2^63 and 2^64-1 included: they clamp to the end, never wrap). Values are kept bounded (inputs in [-1, 1], transcendental
// functions only on bounded arguments) so that a correct compiler agrees within a tight
// tolerance whatever order it sums in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace xlens::testing {

class RandomModuleGenerator {
 public:
  explicit RandomModuleGenerator(uint64_t seed) : rng_(seed) {}

  // The text of module number `id`.
  std::string Generate(int64_t id) {
    values_.clear();
    lines_.clear();
    next_ = 0;
    const int params = Uniform(1, 3);
    std::vector<std::string> signature;
    for (int p = 0; p < params; ++p) {
      const std::string type = RandomType(/*allow_pred=*/false);
      const std::vector<int64_t> dims = RandomDims(Uniform(0, 3));
      const std::string name = fmt::format("p{}", p);
      lines_.push_back(fmt::format("  {} = {} parameter({})", name, ShapeText(type, dims), p));
      values_.push_back({name, type, dims});
    }
    // Ops until `ops` were added (a draw that does not fit its operand adds nothing).
    const int ops = Uniform(3, 14);
    for (int attempt = 0; next_ < ops && attempt < 100; ++attempt) AddRandomOp();
    // The root: the last value, or a tuple of the last few.
    std::string root;
    const int outputs = std::min<int>(Uniform(1, 3), static_cast<int>(values_.size()));
    if (outputs == 1) {
      root = values_.back().name;
    } else {
      std::vector<std::string> names, shapes;
      for (int i = 0; i < outputs; ++i) {
        const Value& v = values_[values_.size() - 1 - i];
        names.push_back(v.name);
        shapes.push_back(ShapeText(v.type, v.dims));
      }
      root = "tuple";
      lines_.push_back(fmt::format("  tuple = ({}) tuple({})", fmt::join(shapes, ", "),
                                   fmt::join(names, ", ")));
    }
    std::string text = fmt::format("HloModule random_{}\n\n", id);
    text += kComputations;
    text += "ENTRY main {\n";
    for (size_t i = 0; i < lines_.size(); ++i) {
      const bool is_root = lines_[i].rfind(fmt::format("  {} =", root), 0) == 0;
      text += is_root ? "  ROOT " + lines_[i].substr(2) : lines_[i];
      text += "\n";
    }
    return text + "}\n";
  }

 private:
  struct Value {
    std::string name;
    std::string type;
    std::vector<int64_t> dims;
  };

  static constexpr const char* kComputations =
      "add_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }\n"
      "max_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }\n"
      "add_s32 { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }\n"
      "max_s32 { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] maximum(a, b) }\n"
      "add_f64 { a = f64[] parameter(0)  b = f64[] parameter(1)  ROOT r = f64[] add(a, b) }\n"
      "less_LT { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=LT }\n"
      "less_GT { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=GT }\n\n";

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::string RandomType(bool allow_pred) {
    static const char* kTypes[] = {"f32", "f32", "f32", "f64", "s32", "f16", "bf16", "s64", "u8"};
    if (allow_pred && Chance(0.05)) return "pred";
    return kTypes[Uniform(0, 8)];
  }
  // The integer type of dynamic starts and gather/scatter indices.
  std::string RandomIndexType() {
    static const char* kIndexTypes[] = {"s32", "s32", "s64", "u32", "u64", "u8", "s8"};
    return kIndexTypes[Uniform(0, 6)];
  }
  // An index into a dimension of `size`: mostly near its range, sometimes at the type's extremes
  // (an unsigned one past INT64_MAX must clamp to the end, not read as negative).
  std::string RandomIndex(const std::string& type, int64_t size) {
    if (Chance(0.2)) {
      if (type == "u64") return Chance(0.5) ? "9223372036854775808" : "18446744073709551615";
      if (type == "s64") return Chance(0.5) ? "9223372036854775807" : "-9223372036854775808";
      if (type == "u32") return "4294967295";
      if (type == "s32") return Chance(0.5) ? "2147483647" : "-2147483648";
      if (type == "u8") return "255";
      if (type == "s8") return Chance(0.5) ? "127" : "-128";
    }
    const int lo = type[0] == 'u' ? 0 : -2;
    return std::to_string(Uniform(lo, static_cast<int>(size) + 2));
  }
  std::vector<int64_t> RandomDims(int rank) {
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(Uniform(1, 7));
    return dims;
  }
  static std::string ShapeText(const std::string& type, const std::vector<int64_t>& dims) {
    return fmt::format("{}[{}]", type, fmt::join(dims, ","));
  }
  static bool IsFloat(const std::string& t) {
    return t == "f32" || t == "f64" || t == "f16" || t == "bf16";
  }

  const Value& Add(const std::string& op_text, const std::string& type,
                   const std::vector<int64_t>& dims) {
    const std::string name = fmt::format("v{}", next_++);
    lines_.push_back(fmt::format("  {} = {} {}", name, ShapeText(type, dims), op_text));
    values_.push_back({name, type, dims});
    return values_.back();
  }

  // A value of exactly (type, dims): an existing one, a convert of one, or a broadcast.
  Value Coerce(const Value& v, const std::string& type, const std::vector<int64_t>& dims) {
    Value x = v;
    if (x.dims != dims) {
      // Broadcast a scalar (reduced from x when x is not one) to the dims.
      if (!x.dims.empty()) {
        x = Reduce(x, /*all=*/true);
      }
      x = Add(fmt::format("broadcast({}), dimensions={{}}", x.name), x.type, dims);
    }
    if (x.type != type) x = Add(fmt::format("convert({})", x.name), type, dims);
    return x;
  }

  Value Reduce(const Value& v, bool all) {
    std::vector<int64_t> reduced, kept;
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (all || Chance(0.5)) reduced.push_back(d);
      else kept.push_back(v.dims[d]);
    }
    std::string type = v.type;
    Value x = v;
    if (type != "f32" && type != "s32" && type != "f64") {
      type = IsFloat(type) ? "f32" : "s32";
      x = Add(fmt::format("convert({})", v.name), type, v.dims);
    }
    const bool max = Chance(0.3);
    const std::string init = Add(fmt::format("constant({})", max ? "-1000" : "0"), type, {}).name;
    return Add(fmt::format("reduce({}, {}), dimensions={{{}}}, to_apply={}_{}", x.name, init,
                           fmt::join(reduced, ","), max && type != "f64" ? "max" : "add", type),
               type, kept);
  }

  // Mostly the newest value, so that ops form chains rather than a fan of dead ends.
  Value PickOperand() {
    if (Chance(0.7)) return values_.back();
    return values_[Uniform(0, static_cast<int>(values_.size()) - 1)];
  }

  void AddRandomOp() {
    const Value v = PickOperand();
    const bool is_float = IsFloat(v.type);
    const bool is_pred = v.type == "pred";
    switch (Uniform(0, 18)) {
      case 0: case 1: {  // unary
        static const char* kFloatOps[] = {"negate", "abs", "tanh", "sine", "cosine", "floor",
                                          "logistic", "round-nearest-even", "sign", "ceil"};
        static const char* kIntOps[] = {"negate", "abs", "not", "popcnt", "sign"};
        if (is_pred) { Add(fmt::format("not({})", v.name), v.type, v.dims); return; }
        if (is_float) {
          Add(fmt::format("{}({})", kFloatOps[Uniform(0, 9)], v.name), v.type, v.dims);
        } else {
          Add(fmt::format("{}({})", kIntOps[Uniform(0, 4)], v.name), v.type, v.dims);
        }
        return;
      }
      case 2: {  // bounded transcendental: exp(tanh(x)), sqrt(abs(x)), log(1 + abs(x))
        if (!is_float) return;
        const Value t = Add(fmt::format("tanh({})", v.name), v.type, v.dims);
        const Value a = Add(fmt::format("abs({})", v.name), v.type, v.dims);
        switch (Uniform(0, 2)) {
          case 0: Add(fmt::format("exponential({})", t.name), v.type, v.dims); break;
          case 1: Add(fmt::format("sqrt({})", a.name), v.type, v.dims); break;
          default: Add(fmt::format("log-plus-one({})", a.name), v.type, v.dims); break;
        }
        return;
      }
      case 3: case 4: case 5: {  // binary with another value of the same shape
        const Value w = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type, v.dims);
        static const char* kOps[] = {"add", "subtract", "multiply", "maximum", "minimum", "divide"};
        std::string op = kOps[Uniform(0, is_float ? 5 : 4)];
        if (is_pred) op = Chance(0.5) ? "and" : "or";
        if (!is_float && !is_pred && Chance(0.2)) op = "divide";  // x/0 and INT_MIN/-1 included
        Add(fmt::format("{}({}, {})", op, v.name, w.name), v.type, v.dims);
        return;
      }
      case 6: {  // compare and select
        if (is_pred) return;
        const Value w = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type, v.dims);
        static const char* kDirections[] = {"LT", "GT", "LE", "GE", "EQ", "NE"};
        const Value c = Add(fmt::format("compare({}, {}), direction={}", v.name, w.name,
                                        kDirections[Uniform(0, 5)]), "pred", v.dims);
        Add(fmt::format("select({}, {}, {})", c.name, v.name, w.name), v.type, v.dims);
        return;
      }
      case 7: {  // broadcast into a bigger shape
        if (v.dims.size() >= 3) return;
        std::vector<int64_t> dims = v.dims;
        const int at = Uniform(0, static_cast<int>(dims.size()));
        dims.insert(dims.begin() + at, Uniform(1, 5));
        std::vector<int64_t> mapping;
        for (size_t d = 0; d < dims.size(); ++d) {
          if (static_cast<int>(d) != at) mapping.push_back(d);
        }
        Add(fmt::format("broadcast({}), dimensions={{{}}}", v.name, fmt::join(mapping, ",")),
            v.type, dims);
        return;
      }
      case 8:  // reduce over random dimensions
        if (v.dims.empty() || is_pred) return;
        Reduce(v, false);
        return;
      case 9: {  // transpose or reverse
        if (v.dims.size() < 1) return;
        std::vector<int64_t> perm(v.dims.size());
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        if (Chance(0.5)) {
          std::vector<int64_t> dims;
          for (int64_t p : perm) dims.push_back(v.dims[p]);
          Add(fmt::format("transpose({}), dimensions={{{}}}", v.name, fmt::join(perm, ",")), v.type, dims);
        } else {
          Add(fmt::format("reverse({}), dimensions={{{}}}", v.name, perm[0]), v.type, v.dims);
        }
        return;
      }
      case 10: {  // slice or pad
        if (v.dims.empty()) return;
        std::vector<int64_t> dims;
        std::vector<std::string> spec;
        if (Chance(0.5)) {
          for (int64_t n : v.dims) {
            const int start = Uniform(0, static_cast<int>(n) - 1);
            const int limit = Uniform(start + 1, static_cast<int>(n));
            const int stride = Uniform(1, 2);
            spec.push_back(fmt::format("[{}:{}:{}]", start, limit, stride));
            dims.push_back((limit - start + stride - 1) / stride);
          }
          Add(fmt::format("slice({}), slice={{{}}}", v.name, fmt::join(spec, ", ")), v.type, dims);
        } else {
          const Value zero = Add("constant(0)", v.type, {});
          for (int64_t n : v.dims) {
            const int lo = Uniform(-1, 2), hi = Uniform(0, 2), interior = Uniform(0, 1);
            const int64_t size = n + lo + hi + (n - 1) * interior;
            if (size < 1) return;
            spec.push_back(fmt::format("{}_{}_{}", lo, hi, interior));
            dims.push_back(size);
          }
          Add(fmt::format("pad({}, {}), padding={}", v.name, zero.name, fmt::join(spec, "x")), v.type, dims);
        }
        return;
      }
      case 11: {  // concatenate with a same-typed value along a dimension
        if (v.dims.empty()) return;
        const int d = Uniform(0, static_cast<int>(v.dims.size()) - 1);
        std::vector<int64_t> other_dims = v.dims;
        other_dims[d] = Uniform(1, 4);
        const Value w = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type, other_dims);
        std::vector<int64_t> dims = v.dims;
        dims[d] += other_dims[d];
        Add(fmt::format("concatenate({}, {}), dimensions={{{}}}", v.name, w.name, d), v.type, dims);
        return;
      }
      case 12: {  // dot of a matrix (or vector) with a new operand
        if (!is_float || v.dims.empty() || v.dims.size() > 2) return;
        const int64_t k = v.dims.back();
        const int64_t n = Uniform(1, 6);
        const Value w = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type, {k, n});
        std::vector<int64_t> dims(v.dims.begin(), v.dims.end() - 1);
        dims.push_back(n);
        Add(fmt::format("dot({}, {}), lhs_contracting_dims={{{}}}, rhs_contracting_dims={{0}}",
                        v.name, w.name, v.dims.size() - 1), v.type, dims);
        return;
      }
      case 14: {  // dynamic-slice or dynamic-update-slice at constant starts (clamped if too far)
        if (v.dims.empty()) return;
        const std::string index_type = RandomIndexType();
        std::vector<std::string> starts;
        std::vector<int64_t> sizes;
        for (int64_t n : v.dims) {
          starts.push_back(Add(fmt::format("constant({})", RandomIndex(index_type, n)), index_type, {}).name);
          sizes.push_back(Uniform(1, static_cast<int>(n)));
        }
        if (Chance(0.5)) {
          Add(fmt::format("dynamic-slice({}, {}), dynamic_slice_sizes={{{}}}", v.name, fmt::join(starts, ", "),
                          fmt::join(sizes, ",")), v.type, sizes);
        } else {
          const Value u = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type, sizes);
          Add(fmt::format("dynamic-update-slice({}, {}, {})", v.name, u.name, fmt::join(starts, ", ")),
              v.type, v.dims);
        }
        return;
      }
      case 15: {  // reduce-window: sum or max over a random window, stride and padding
        if (v.dims.empty() || is_pred) return;
        Value x = v;
        std::string type = v.type;
        if (type != "f32" && type != "s32") {
          type = IsFloat(type) ? "f32" : "s32";
          x = Add(fmt::format("convert({})", v.name), type, v.dims);
        }
        std::vector<std::string> size, stride, pad;
        std::vector<int64_t> dims;
        for (int64_t n : v.dims) {
          const int w = Uniform(1, std::min<int>(3, static_cast<int>(n) + 1));
          const int s = Uniform(1, 2);
          const int lo = Uniform(0, 1), hi = Uniform(0, 1);
          const int64_t padded = n + lo + hi;
          if (padded < w) return;
          size.push_back(std::to_string(w));
          stride.push_back(std::to_string(s));
          pad.push_back(fmt::format("{}_{}", lo, hi));
          dims.push_back((padded - w) / s + 1);
        }
        const bool max = Chance(0.5);
        const std::string init = Add(fmt::format("constant({})", max ? "-1000" : "0"), type, {}).name;
        Add(fmt::format("reduce-window({}, {}), window={{size={} stride={} pad={}}}, to_apply={}_{}", x.name, init,
                        fmt::join(size, "x"), fmt::join(stride, "x"), fmt::join(pad, "x"), max ? "max" : "add", type),
            type, dims);
        return;
      }
      case 16: {  // gather rows of a matrix, or scatter-add rows into one, at constant indices
        if (v.dims.size() != 2) return;
        const int count = Uniform(1, 5);
        const std::string index_type = RandomIndexType();
        std::vector<std::string> idx;
        for (int i = 0; i < count; ++i) idx.push_back(RandomIndex(index_type, v.dims[0]));
        const Value indices =
            Add(fmt::format("constant({{{}}})", fmt::join(idx, ", ")), index_type, {count});
        if (Chance(0.5) || (v.type != "f32" && v.type != "s32")) {
          // Out-of-range starts are clamped.
          Add(fmt::format("gather({}, {}), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
                          "start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{}}}",
                          v.name, indices.name, v.dims[1]),
              v.type, {count, v.dims[1]});
        } else {
          // Out-of-range rows are skipped.
          const Value u = Coerce(values_[Uniform(0, static_cast<int>(values_.size()) - 1)], v.type,
                                 {count, v.dims[1]});
          Add(fmt::format("scatter({}, {}, {}), update_window_dims={{1}}, inserted_window_dims={{0}}, "
                          "scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add_{}",
                          v.name, indices.name, u.name, v.type),
              v.type, v.dims);
        }
        return;
      }
      case 17: {  // iota along a random dimension, or a clamp between two constants
        if (v.dims.empty() || is_pred) return;
        if (Chance(0.5)) {
          Add(fmt::format("iota(), iota_dimension={}", Uniform(0, static_cast<int>(v.dims.size()) - 1)), v.type, v.dims);
        } else {
          const Value lo = Add(v.type[0] == 'u' ? "constant(0)" : "constant(-1)", v.type, {});
          const Value hi = Add("constant(1)", v.type, {});
          Add(fmt::format("clamp({}, {}, {})", lo.name, v.name, hi.name), v.type, v.dims);
        }
        return;
      }
      case 18: {  // sort a float vector along its last dimension, ascending or descending
        if (v.dims.empty() || v.type != "f32") return;
        const std::string dir = Chance(0.5) ? "LT" : "GT";
        Add(fmt::format("sort({}), dimensions={{{}}}, to_apply=less_{}", v.name, v.dims.size() - 1, dir),
            v.type, v.dims);
        return;
      }
      default: {  // convert to another type, or reshape to a flat vector
        if (Chance(0.5)) {
          Add(fmt::format("convert({})", v.name), RandomType(true), v.dims);
        } else {
          int64_t n = 1;
          for (int64_t d : v.dims) n *= d;
          Add(fmt::format("reshape({})", v.name), v.type, {n});
        }
        return;
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<Value> values_;
  std::vector<std::string> lines_;
  int next_ = 0;
};

}  // namespace xlens::testing
