#include "hints.hpp"

#include <dlock/client.hpp>

namespace dlock::cli {
namespace {

std::string redis_advice(Errc code) {
  switch (code) {
    case Errc::unavailable:
      return "is the server running and reachable? check --url / DLOCK_URL";
    case Errc::auth_failed:
      return "check the user and password in the URL";
    case Errc::tls_failed:
      return "check the server certificate and the cacert= parameter";
    case Errc::permission_denied:
      return "the ACL user needs EVALSHA/EVAL and access to the dlock:* keys";
    case Errc::wrong_type:
      return "the lock key holds other data: pick another name or prefix";
    default:
      return {};
  }
}

std::string postgres_advice(const Status& s) {
  // 25006: a read-only transaction (a standby, or default_transaction_read_only).
  if (s.backend_code() == "25006")
    return "the server takes no writes in this session (a standby, or default_transaction_read_only for this "
           "role or database): point --url at the primary, or turn read-only off for this role";
  switch (s.code()) {
    case Errc::unavailable:
      return "is the server running and reachable? check --url / DLOCK_URL";
    case Errc::auth_failed:
      return "check the user and password in the URL, and the server's pg_hba.conf";
    case Errc::tls_failed:
      return "check the server certificate and the URL's TLS parameters";
    case Errc::permission_denied:
      return "the role needs SELECT, INSERT, UPDATE and DELETE on the lock tables and USAGE on their sequence; "
             "to create them, run `dlock migrate URL` as a role that may";
    case Errc::wrong_type:
      return "the lock tables are missing or of another version: run `dlock migrate URL` as a role that may "
             "create them";
    default:
      return {};
  }
}

std::string sqlite_advice(Errc code) {
  switch (code) {
    case Errc::unavailable:
      return "the lock file could not be used just now (held busy by another process, or out of file or inotify "
             "handles): retry, or check the system's limits";
    case Errc::permission_denied:
      return "this user cannot write the lock file or its directory (SQLite writes a journal beside the file)";
    case Errc::wrong_type:
      return "the file is not a dlock lock file (another database, or damaged): use another path";
    case Errc::server_error:
      return "the lock file could not be opened, read or written: check that this user may write it and its "
             "directory (SQLite writes beside it), the free space, and that the file is not damaged";
    default:
      return {};
  }
}

std::string zookeeper_advice(Errc code) {
  switch (code) {
    case Errc::unavailable:
      return "is the ensemble running and reachable? check --url / DLOCK_URL";
    case Errc::auth_failed:
      return "check the user and password (digest) in the URL";
    case Errc::permission_denied:
      return "the lock nodes belong to another identity (ZooKeeper ACL): use its user:password, or another "
             "chroot or prefix";
    case Errc::wrong_type:
      return "the lock path holds other nodes: pick another chroot or prefix";
    default:
      return {};
  }
}

std::string etcd_advice(Errc code) {
  switch (code) {
    case Errc::unavailable:
      return "is the cluster running and reachable? check --url / DLOCK_URL";
    case Errc::auth_failed:
      return "check the user and password in the URL (etcd's authentication)";
    case Errc::permission_denied:
      return "this etcd user may not write the lock's keys: grant it a role on the prefix";
    case Errc::tls_failed:
      return "check cacert (the CA of the members' certificates) and cert/key in the URL";
    default:
      return {};
  }
}

}  // namespace

Store store_of(std::string_view url) {
  const std::string_view family = dlock::backend_family(url);
  if (family == "redis" || family == "redlock") return Store::redis;  // one server's advice
  if (family == "postgres") return Store::postgres;
  if (family == "sqlite") return Store::sqlite;
  if (family == "zookeeper") return Store::zookeeper;
  if (family == "etcd") return Store::etcd;
  return Store::unknown;
}

std::string advice(const Status& status, std::string_view url) {
  std::string line;
  switch (store_of(url)) {
    case Store::redis:
      line = redis_advice(status.code());
      break;
    case Store::postgres:
      line = postgres_advice(status);
      break;
    case Store::sqlite:
      line = sqlite_advice(status.code());
      break;
    case Store::zookeeper:
      line = zookeeper_advice(status.code());
      break;
    case Store::etcd:
      line = etcd_advice(status.code());
      break;
    case Store::unknown:
      break;
  }
  if (!line.empty()) return line;
  switch (status.code()) {
    case Errc::invalid_argument:
      return "check the URL and the option values (dlock --help)";
    case Errc::unavailable:
      return "is the lock store reachable? check --url / DLOCK_URL";
    case Errc::outcome_unknown:
      return "the store stopped answering mid-call; retry when it is healthy";
    default:
      return "see the message above";
  }
}

}  // namespace dlock::cli
