#include "harness.hpp"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace dlock::bench {

long long mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

Flags::Flags(RunFlags& run) { add("--seconds", run.seconds).add("--reps", run.reps).add("--json", run.json); }

Flags& Flags::add(const std::string& name, double& v) {
  set_[name] = [&v](const std::string& s) { v = std::stod(s); };
  return *this;
}
Flags& Flags::add(const std::string& name, int& v) {
  set_[name] = [&v](const std::string& s) { v = std::stoi(s); };
  return *this;
}
Flags& Flags::add(const std::string& name, std::string& v) {
  set_[name] = [&v](const std::string& s) { v = s; };
  return *this;
}

bool Flags::parse(int argc, char** argv) const {
  for (int i = 1; i < argc; i += 2) {
    const auto it = set_.find(argv[i]);
    if (it == set_.end() || i + 1 >= argc) return false;
    try {
      it->second(argv[i + 1]);
    } catch (const std::logic_error&) {  // std::stod and std::stoi: not a number, or out of range
      return false;
    }
  }
  return true;
}

int usage(std::string_view synopsis, int status) {
  std::cerr << "usage: " << synopsis << '\n';
  return status;
}

void PairsByClient::add(const std::string& client, const Pairs& p) {
  if (!rate_.count(client)) clients_.push_back(client);
  rate_[client].push_back(p.per_s);
  p50_[client].push_back(p.p50_us);
}

double PairsByClient::rate(const std::string& client) const {
  const auto it = rate_.find(client);
  return it == rate_.end() ? 0 : median(it->second);
}

double PairsByClient::p50(const std::string& client) const {
  const auto it = p50_.find(client);
  return it == p50_.end() ? 0 : median(it->second);
}

void PairsByClient::print(const std::string& limit, int width) const {
  std::printf("  %-*s %12s %10s %14s\n", width, "client", "pairs/s", "p50 us", "vs the limit");
  for (const auto& c : clients_)
    std::printf("  %-*s %12.0f %10.1f %13.2fx\n", width, c.c_str(), rate(c), p50(c), rate(c) / rate(limit));
}

JsonLine& JsonLine::str(std::string_view key, std::string_view v) { return raw(key, "\"" + std::string(v) + "\""); }

JsonLine& JsonLine::raw(std::string_view key, std::string_view json) {
  if (body_.size() > 1) body_ += ", ";
  body_ += "\"";
  body_ += key;
  body_ += "\": ";
  body_ += json;
  return *this;
}

void JsonLine::write(const std::string& path) const {
  if (!path.empty()) std::ofstream(path) << text() << '\n';
}

std::string json_object(const std::map<std::string, std::string>& fields) {
  JsonLine j;
  for (const auto& [k, v] : fields) j.raw(k, v);
  return j.text();
}

std::string num(double v) {
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

int exit_status(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
}

int in_temp_dir(const std::string& program, const std::function<int(const std::string& dir)>& body) {
  std::string tmpl = "/tmp/" + program + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror(("mkdtemp " + tmpl).c_str());
    return 1;
  }
  const int rc = exit_status(program, [&] { return body(tmpl); });
  std::filesystem::remove_all(tmpl);
  return rc;
}

void in_processes(int n, const std::function<int(int k)>& body, const std::string& what) {
  std::vector<pid_t> kids;
  for (int k = 0; k < n; ++k) {
    const pid_t pid = fork();
    if (pid == 0) _exit(body(k));
    kids.push_back(pid);
  }
  bool failed = false;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    failed = failed || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  if (failed) throw std::runtime_error("a " + what + " failed");
}

}  // namespace dlock::bench
