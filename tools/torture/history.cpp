#include "history.hpp"

#include <fcntl.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace torture {

std::int64_t mono_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t wall_ms() noexcept {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  return std::int64_t{tv.tv_sec} * 1000 + tv.tv_usec / 1000;
}

std::string to_json_line(const Event& e) {
  nlohmann::json j;
  j["t"] = e.t;
  j["proc"] = e.proc;
  if (e.inc) j["inc"] = e.inc;
  if (e.pid) j["pid"] = e.pid;
  j["op"] = e.op;
  if (!e.phase.empty()) j["phase"] = e.phase;
  if (!e.grant.empty()) j["grant"] = e.grant;
  if (e.fence) j["fence"] = *e.fence;
  if (e.value) j["value"] = *e.value;
  if (e.seq) j["seq"] = *e.seq;
  if (!e.target.empty()) j["target"] = e.target;
  if (!e.kind.empty()) j["kind"] = e.kind;
  if (!e.detail.empty()) j["detail"] = e.detail;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Event from_json_line(const std::string& line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const std::exception& ex) {
    throw std::runtime_error(std::string("bad history line: ") + ex.what());
  }
  Event e;
  e.t = j.value("t", std::int64_t{0});
  e.proc = j.value("proc", "");
  e.inc = j.value("inc", 0);
  e.pid = j.value("pid", 0);
  e.op = j.value("op", "");
  e.phase = j.value("phase", "");
  e.grant = j.value("grant", "");
  if (j.contains("fence")) e.fence = j["fence"].get<std::uint64_t>();
  if (j.contains("value")) e.value = j["value"].get<std::int64_t>();
  if (j.contains("seq")) e.seq = j["seq"].get<std::int64_t>();
  e.target = j.value("target", "");
  e.kind = j.value("kind", "");
  e.detail = j.value("detail", "");
  return e;
}

HistoryWriter::HistoryWriter(const std::string& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
}

HistoryWriter::~HistoryWriter() { ::close(fd_); }

void HistoryWriter::write(const Event& e) noexcept {
  try {
    std::string line = to_json_line(e);
    line.push_back('\n');
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {
  }
}

std::vector<Event> read_history_dir(const std::string& dir) {
  std::vector<Event> out;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      try {
        out.push_back(from_json_line(line));
      } catch (const std::runtime_error&) {
        // A process killed mid-write leaves at most one torn line.
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  return out;
}

}  // namespace torture
