// TCC participants behind HTTP, both sides of DTM's contract: the
// coordinator's calls (http_participant) and a participant handler's
// parsing and answers (branch_from_http, http_reply, handle_http).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <stdexcept>

#include "core/url_parts.hpp"
#include "dlock/tx.hpp"
#include "tx/http_client.hpp"

namespace dlock::tx {

namespace {

// A header's name is a token; its value has no line breaks (else a request
// could be split in two).
bool valid_header(const std::string& name, const std::string& value) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= ' ' || c >= 127 || c == ':') return false;
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

// At most `max` bytes of `text` for a log line: cut on a UTF-8 character's
// boundary ("..." added when cut), each byte that is not part of a valid
// UTF-8 character as '?', control characters as spaces. A branch's last
// error is printed as JSON, which must be UTF-8.
std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;                   // the character's length; 0: not a valid one
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b < 0x80) {
      n = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      if (b == 0xE0) lo = 0xA0;  // no overlong form
      if (b == 0xED) hi = 0x9F;  // no surrogate
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      if (b == 0xF0) lo = 0x90;  // no overlong form
      if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    }
    for (std::size_t k = 1; k < n; ++k) {
      if (i + k >= text.size()) {  // the text ends inside it
        n = 0;
        break;
      }
      const auto c = static_cast<unsigned char>(text[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
        n = 0;
        break;
      }
    }
    const std::size_t len = std::max<std::size_t>(n, 1);
    if (i + len > max) {
      out += "...";
      return out;
    }
    if (n == 0)
      out += '?';
    else if (n == 1 && (b < 0x20 || b == 0x7F))
      out += ' ';
    else
      out.append(text.substr(i, n));
    i += len;
  }
  return out;
}

// DTM's answer contract: 409 or FAILURE in a 200's body is a definite
// failure, 425 or ONGOING is "not yet", any other 2xx is success; anything
// else says nothing of what happened.
Outcome outcome_of(const detail::HttpResponse& r, std::string& why) {
  if (r.status == 409) return Outcome::failure;
  if (r.status == 425) return Outcome::ongoing;
  if (r.status >= 200 && r.status < 300) {
    if (r.body.find("FAILURE") != std::string::npos) return Outcome::failure;
    if (r.body.find("ONGOING") != std::string::npos) return Outcome::ongoing;
    return Outcome::success;
  }
  why = "HTTP " + std::to_string(r.status) + ": " + printable(r.body, 200);
  return Outcome::unknown;
}

struct Endpoint {
  std::shared_ptr<detail::HttpOrigin> origin;
  std::string target;  // path?query, ready for '&' or '?'
};

}  // namespace

Result<Participant> http_participant(HttpParticipant options) {
  if (options.timeout <= milliseconds::zero())
    return Status(Errc::invalid_argument, "http_participant: timeout must be positive");
  for (const auto& [name, value] : options.headers)
    if (!valid_header(name, value))
      return Status(Errc::invalid_argument,
                    "http_participant: header '" + name + "' is not a valid name, or its value has a line break");
  std::map<std::string, std::shared_ptr<detail::HttpOrigin>> origins;  // the three URLs share connections
  Endpoint endpoints[3];
  const std::string* urls[3] = {&options.try_url, &options.confirm_url, &options.cancel_url};
  for (int i = 0; i < 3; ++i) {
    std::string error;
    auto url = detail::parse_http_url(*urls[i], error);
    if (!url) return Status(Errc::invalid_argument, "http_participant: '" + *urls[i] + "': " + error);
    auto& origin = origins[std::string(url->tls ? "s" : "") + url->host + ":" + url->port];
    try {
      if (!origin) origin = std::make_shared<detail::HttpOrigin>(*url, options.ca_file);
    } catch (const std::exception& e) {
      return Status(Errc::invalid_argument, "http_participant: CA file '" + options.ca_file + "': " + e.what());
    }
    endpoints[i] = {origin, url->target + (url->target.find('?') == std::string::npos ? "?" : "&")};
  }
  struct Shared {
    HttpParticipant options;
    Endpoint endpoints[3];
  };
  auto shared = std::make_shared<Shared>();
  shared->options = std::move(options);
  for (int i = 0; i < 3; ++i) shared->endpoints[i] = std::move(endpoints[i]);
  auto call = [shared](int i) {
    return [shared, i](const BranchContext& c) {
      const Endpoint& e = shared->endpoints[i];
      // Connecting, sending and the answer within the participant's
      // timeout, and by the coordinator's deadline for this call.
      const auto now = std::chrono::steady_clock::now();
      if (c.deadline <= now)
        throw Error(Errc::timeout, std::string(to_string(c.op)) + " not sent: the call's deadline had passed");
      const auto deadline = std::min(c.deadline, now + shared->options.timeout);
      const std::string target = e.target + "gid=" + dlock::detail::percent_encode(c.gid) +
                                 "&trans_type=tcc&branch_id=" + std::to_string(c.branch) +
                                 "&op=" + std::string(to_string(c.op));
      detail::HttpResponse r;
      try {
        r = e.origin->post(target, c.payload, shared->options.content_type, shared->options.headers, deadline);
      } catch (const std::exception& failed) {  // the transport's: no answer to read
        throw Error(Errc::outcome_unknown, failed.what());
      }
      std::string why;
      const Outcome o = outcome_of(r, why);
      if (o == Outcome::unknown) throw Error(Errc::outcome_unknown, std::string(to_string(c.op)) + " answered " + why);
      return o;
    };
  };
  return Participant{call(0), call(1), call(2)};
}

Result<BranchContext> branch_from_http(std::string_view target, std::string body) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return Status(Errc::invalid_argument, "no query: gid, branch_id and op are missing");
  std::string_view query = target.substr(q + 1);
  BranchContext c;
  bool have_gid = false, have_branch = false, have_op = false;
  while (!query.empty()) {
    const std::string_view kv = dlock::detail::next_param(query);
    const auto eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    std::string value;
    if (!dlock::detail::percent_decode(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1), value))
      return Status(Errc::invalid_argument, "a malformed escape in '" + std::string(key) + "'");
    if (key == "gid") {
      c.gid = std::move(value);
      have_gid = !c.gid.empty();
    } else if (key == "branch_id") {
      have_branch = dlock::detail::parse_int(value, c.branch) && c.branch >= 0;
    } else if (key == "op") {
      have_op = true;
      if (value == "try")
        c.op = Op::try_;
      else if (value == "confirm")
        c.op = Op::confirm;
      else if (value == "cancel")
        c.op = Op::cancel;
      else
        have_op = false;
    }
  }
  if (!have_gid) return Status(Errc::invalid_argument, "no gid");
  if (!have_branch) return Status(Errc::invalid_argument, "no branch_id, or not a whole number >= 0");
  if (!have_op) return Status(Errc::invalid_argument, "no op, or not try, confirm or cancel");
  c.payload = std::move(body);
  return c;
}

HttpReply http_reply(Outcome outcome) {
  switch (outcome) {
    case Outcome::success:
      return {200, R"({"dtm_result":"SUCCESS"})"};
    case Outcome::failure:
      return {409, R"({"dtm_result":"FAILURE"})"};
    case Outcome::ongoing:
      return {425, R"({"dtm_result":"ONGOING"})"};
    case Outcome::unknown:
      break;
  }
  return {500, R"({"dtm_result":"UNKNOWN"})"};
}

namespace {

// The request id ("rid") in the target's query when it is a plain token
// (1 to 64 letters, digits, '-' or '_': safe in JSON as it is); "" otherwise.
// The last one: the coordinator appends its own after any the participant's
// URL already has.
std::string request_id(std::string_view target) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = target.substr(q + 1);
  std::string_view last;
  bool found = false;
  while (!query.empty()) {
    const std::string_view kv = dlock::detail::next_param(query);
    if (!kv.starts_with("rid=")) continue;
    last = kv.substr(4);
    found = true;
  }
  if (!found || last.empty() || last.size() > 64) return {};
  for (char ch : last)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') return {};
  return std::string(last);
}

HttpReply answer(Outcome outcome, const std::string& rid) {
  HttpReply r = http_reply(outcome);
  if (!rid.empty()) r.body.insert(r.body.size() - 1, ",\"rid\":\"" + rid + "\"");  // before the closing '}'
  return r;
}

}  // namespace

HttpReply handle_http(std::string_view target, std::string body,
                      const std::function<Outcome(const BranchContext&)>& call) {
  auto c = branch_from_http(target, std::move(body));
  if (!c.ok()) return {400, c.status().message()};
  const std::string rid = request_id(target);
  try {
    return answer(call(*c), rid);
  } catch (const std::exception&) {
    return answer(Outcome::unknown, rid);
  } catch (...) {
    return answer(Outcome::unknown, rid);
  }
}

}  // namespace dlock::tx
