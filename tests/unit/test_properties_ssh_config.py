"""Property tests of where the ssh transport connects (transports/ssh/config.py): a
ProxyJump entry round trips, and any ``~/.ssh/config`` text (of the keys hpcbridge reads)
gives a target or a ConfigurationError, never another exception."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpcbridge.errors import ConfigurationError
from hpcbridge.transports.ssh.config import parse_jump, resolve, split_jumps

pytest.importorskip("paramiko", reason="the ssh config is read by paramiko, absent here")

SETTINGS = settings(max_examples=60, deadline=None)

_hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,12}", fullmatch=True)
_users = st.from_regex(r"[a-z_][a-z0-9_.-]{0,8}", fullmatch=True)


@SETTINGS
@given(
    st.one_of(st.none(), _users),
    st.one_of(_hosts, st.just("[::1]"), st.just("[fe80::1%eth0]")),
    st.one_of(st.none(), st.integers(1, 65535)),
    st.booleans(),
)
def test_jump_round_trips(user: object, host: str, port: object, scheme: bool) -> None:
    spec = ("ssh://" if scheme else "") + (f"{user}@" if user else "") + host
    spec += f":{port}" if port else ""
    assert parse_jump(spec) == (user, host.strip("[]"), port)
    assert split_jumps(f" {spec} , {spec}") == [spec, spec]


@SETTINGS
@given(st.text(max_size=30))
@example("h:99999999999999999999")
@example("h:²")
def test_any_jump_text_is_a_hop_or_a_configuration_error(text: str) -> None:
    try:
        user, host, port = parse_jump(text)
    except ConfigurationError:
        return
    assert host and (port is None or 0 < port < 65536)


_KEYS = [
    "HostName",
    "User",
    "Port",
    "IdentityFile",
    "IdentitiesOnly",
    "UserKnownHostsFile",
    "GlobalKnownHostsFile",
    "ProxyJump",
    "ProxyCommand",
]
_VALUE_CHARS = st.sampled_from(list("abz019 ._-@:[],'\"%~/=²"))
_lines = st.tuples(
    st.sampled_from(_KEYS + ["Host", "Host *", "Hostname"]),
    st.sampled_from([" ", "=", " = ", "\t"]),
    st.one_of(
        st.text(_VALUE_CHARS, max_size=10),
        st.sampled_from(["22", "0", "70000", "²", "jump", "u@jump:2222", "a,b", "none", "yes"]),
    ),
).map("".join)
_configs = st.lists(_lines, max_size=6).map(lambda lines: "Host target\n" + "\n".join(lines))


@SETTINGS
@given(_configs, st.sampled_from(["target", "u@target", "other"]))
@example("Host target\nUserKnownHostsFile a'b", "target")
@example('Host target\nGlobalKnownHostsFile "x', "target")
@example("Host target\nPort ²", "target")
@example("Host target\nProxyJump a,b\nHost a\nPort x", "target")
def test_any_ssh_config_is_a_target_or_a_configuration_error(text: str, host: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "config")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        try:
            target = resolve(host, config_path=path)
        except ConfigurationError:
            return
    assert all(0 < hop.port < 65536 and hop.hostname for hop in target.chain)
