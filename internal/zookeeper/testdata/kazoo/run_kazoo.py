"""Run kazoo's own tests, unmodified, against a ZooKeeper server at HOST:PORT.

Usage: /usr/bin/python3 run_kazoo.py HOST:PORT [pytest arguments...]

kazoo's test harness (kazoo.testing.harness) starts a Java ZooKeeper cluster
of its own through get_global_cluster(). This wrapper replaces that function
with one returning a one-server stand-in whose address is HOST:PORT and
whose start and stop do nothing, then runs pytest on the test modules of
Debian's python3-kazoo, as installed. Extra arguments go to pytest (-x, -k);
when they name tests (node ids, "file.py::Class::test"), only those run.

Modules run whole: test_lock, test_election, test_barrier, test_counter,
test_party, test_queue, test_lease and test_watchers. Their session-expiry
and connection-loss tests break the connection from the client's side
(KazooTestHarness.expire_session and lose_connection inject the event into
the client), so they need no server restart.

From test_client: TestClient's tests of create, delete, exists, get, set,
children, ephemeral and sequence nodes, and TestClientTransactions. Left
out of those:
  - TestClient::test_create_makepath_incompatible_acls, test_get_acls,
    test_set_acls and TestClientTransactions::test_default_acl: they set
    ACLs of the digest scheme and authenticate with add_auth("digest");
    the server under test accepts only world:anyone.
Not selected from test_client (outside the operations above): the tests
that stop and restart a cluster node (TestClient::test_update_host_list,
test_request_queuing_*), authentication (TestAuthentication), reconfig
(TestReconfig, a cluster feature), and the connection and constructor
tests. test_connection is left out whole: it stops cluster nodes.

Tests that gate on the server's version (test_create_acl_duplicate,
test_create_stat, TestClientTransactions' setUp, TestLockingQueue's setUp)
ask it with the "envi" four-letter word, on a connection of its own; the
caller must not set TRAVIS, which would take the version from
ZOOKEEPER_VERSION instead.
"""

import os
import re
import sys

import pytest

import kazoo.testing.harness as harness
import kazoo.tests

TESTS = os.path.dirname(kazoo.tests.__file__)

MODULES = [
    "test_lock",
    "test_election",
    "test_barrier",
    "test_counter",
    "test_party",
    "test_queue",
    "test_lease",
    "test_watchers",
    "test_client",
]

# test_client: the classes run, and in TestClient the tests whose names
# match CLIENT_OPS.
CLIENT_CLASSES = {"TestClient", "TestClientTransactions"}
CLIENT_OPS = re.compile(r"^test_(create|delete|exists|get|set)|children|ephemeral|sequence")
LEFT_OUT = {
    "TestClient::test_create_makepath_incompatible_acls",  # digest ACL
    "TestClient::test_get_acls",  # digest ACL
    "TestClient::test_set_acls",  # digest ACL
    "TestClientTransactions::test_default_acl",  # digest ACL
}


class Server:
    """One server of the stand-in cluster: already running, never stopped."""

    def __init__(self, address):
        self.address = address
        self.running = True

    def run(self):
        pass

    def stop(self):
        pass

    def destroy(self):
        pass


class Cluster(list):
    """The stand-in for kazoo.testing.common.ZookeeperCluster."""

    def start(self):
        pass

    def stop(self):
        pass

    def terminate(self):
        pass


class Select:
    """A pytest plugin deselecting test_client's tests outside the subset."""

    def pytest_collection_modifyitems(self, config, items):
        keep, drop = [], []
        for item in items:
            (keep if selected(item) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


def selected(item):
    if item.module.__name__.rsplit(".", 1)[-1] != "test_client":
        return True
    cls = item.cls.__name__ if item.cls else ""
    name = cls + "::" + item.name
    if cls not in CLIENT_CLASSES or name in LEFT_OUT:
        return False
    return cls == "TestClientTransactions" or CLIENT_OPS.search(item.name) is not None


def main():
    if len(sys.argv) < 2 or ":" not in sys.argv[1]:
        sys.exit("usage: run_kazoo.py HOST:PORT [pytest arguments...]")
    cluster = Cluster([Server(sys.argv[1])])
    harness.get_global_cluster = lambda: cluster
    extra = sys.argv[2:]
    if any("::" in a for a in extra):
        paths = []
    else:
        paths = [os.path.join(TESTS, m + ".py") for m in MODULES]
    args = ["-p", "no:cacheprovider", "-p", "no:warnings", "-q", "-rfEs"] + extra + paths
    sys.exit(pytest.main(args, plugins=[Select()]))


if __name__ == "__main__":
    main()
