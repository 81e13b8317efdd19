// bench/harness.h — what every benchmark program shares: the machine's
// description, the median, runs interleaved across the systems compared, one
// progress line, a CSV writer and a fixed-width table. Header-only; benchmarks only (not part of libtessera).
//
// Ratios, not absolute figures: on a shared machine a slow stretch lands on
// every system of one round alike when their runs are interleaved, so the
// ratios of one run hold while absolute times drift (docs/benchmarks.md).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/utsname.h>
#include <unistd.h>

namespace tessera::bench {

/// The machine a figure was measured on, for the line every benchmark prints
/// before its figures: "CPU: <model name>, <n> online; kernel <release>". A
/// figure that holds on one CPU model may not on another (docs/benchmarks.md
/// keeps a row per CPU).
inline std::string machine() {
  std::string model = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  std::string kernel = "unknown";
  if (utsname u{}; uname(&u) == 0) kernel = std::string(u.sysname) + " " + u.release;
  return "CPU: " + model + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
         " online; kernel " + kernel;
}

/// The median of `v`: the middle value, or the mean of the two middle values
/// when `v` has an even count. Precondition: `v` is not empty.
inline double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("bench::median: no values");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The median of `reps` calls of `once` (each returns one measurement).
template <class F>
double median_of(int reps, F&& once) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) v.push_back(once());
  return median(std::move(v));
}

/// The median of `runs` calls of each fn, interleaved: each round calls every
/// fn once, in turn, so that the systems compared share the machine's slow
/// stretches.
template <class... Fns>
std::array<double, sizeof...(Fns)> interleaved_medians(int runs, Fns&&... fns) {
  std::array<std::vector<double>, sizeof...(Fns)> v;
  for (int i = 0; i < runs; ++i) {
    std::size_t k = 0;
    ((v[k++].push_back(fns())), ...);
  }
  std::array<double, sizeof...(Fns)> out{};
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = median(std::move(v[k]));
  return out;
}

/// One progress line on stderr, rewritten in place ("[ 12/252] label", or
/// "[ 12] label" when the total is not known: 0), so that a long run shows
/// where it is; cleared when done or destroyed.
class progress {
 public:
  explicit progress(std::size_t total = 0) : total_(total) {}
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  ~progress() { done(); }

  /// Counts one step and shows `label` beside the count.
  void step(const std::string& label) {
    ++done_;
    if (total_ != 0) {
      std::fprintf(stderr, "\r[%3zu/%3zu] %-60.60s", done_, total_, label.c_str());
    } else {
      std::fprintf(stderr, "\r[%3zu] %-64.64s", done_, label.c_str());
    }
    std::fflush(stderr);
    shown_ = true;
  }
  /// Clears the line.
  void done() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%75s\r", "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  std::size_t total_;
  std::size_t done_ = 0;
  bool shown_ = false;
};

/// Writes a CSV file: a header, then rows of as many fields. Fields are
/// written as given (numbers with the stream's default precision, raised to
/// 10 digits); a field holding a comma or a quote is quoted.
class csv_writer {
 public:
  /// Opens `path` and writes the header. Throws std::runtime_error naming the
  /// path if it cannot be written.
  csv_writer(const std::string& path, std::initializer_list<const char*> columns)
      : path_(path), out_(path), columns_(columns.size()) {
    if (!out_) throw std::runtime_error("cannot write CSV to '" + path + "'");
    out_.precision(10);
    std::size_t i = 0;
    for (const char* c : columns) out_ << (i++ != 0 ? "," : "") << c;
    out_ << '\n';
  }

  /// One row. Throws std::logic_error if the field count differs from the header's.
  template <class... Fields>
  void row(const Fields&... fields) {
    if (sizeof...(Fields) != columns_) {
      throw std::logic_error("CSV '" + path_ + "': a row of " + std::to_string(sizeof...(Fields)) +
                             " fields under a header of " + std::to_string(columns_));
    }
    std::size_t i = 0;
    ((out_ << (i++ != 0 ? "," : ""), field(fields)), ...);
    out_ << '\n';
  }

  const std::string& path() const noexcept { return path_; }

 private:
  template <class T>
  void field(const T& v) {
    std::ostringstream s;
    s.precision(10);
    s << v;
    const std::string text = s.str();
    if (text.find_first_of(",\"\n") == std::string::npos) {
      out_ << text;
      return;
    }
    out_ << '"';
    for (char c : text) out_ << (c == '"' ? "\"\"" : std::string(1, c));
    out_ << '"';
  }

  std::string path_;
  std::ofstream out_;
  std::size_t columns_;
};

/// A fixed-width text table for stdout: the first column (and any marked by
/// left()) left-aligned, the others right-aligned, each as wide as its widest
/// cell.
class table {
 public:
  explicit table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  /// Left-aligns column `c` (text, not figures).
  table& left(std::size_t c) {
    left_.push_back(c);
    return *this;
  }
  void add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::FILE* to = stdout) const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_) {
      if (width.size() < r.size()) width.resize(r.size(), 0);
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    for (const auto& r : rows_) {
      for (std::size_t i = 0; i < r.size(); ++i) {
        const int w = i + 1 == r.size() && is_left(i) ? 0 : static_cast<int>(width[i]);
        std::fprintf(to, is_left(i) ? "%s%-*s" : "%s%*s", i == 0 ? "" : "  ", w, r[i].c_str());
      }
      std::fprintf(to, "\n");
    }
  }

 private:
  bool is_left(std::size_t c) const {
    return c == 0 || std::find(left_.begin(), left_.end(), c) != left_.end();
  }
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::size_t> left_;
};

/// `v` with `digits` decimals ("3.14"), for table cells.
inline std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace tessera::bench
