"""URI precedence, target classification, and the local form of ssh:// URIs."""

from __future__ import annotations

import pytest

from hpcbridge.errors import ConfigurationError
from hpcbridge.schedulers.flux.uri import choose_uri, classify, local_form


def test_precedence() -> None:
    env = "local:///env"  # the FLUX_URI of the environment the settings were read from
    assert choose_uri("local:///x", "local:///s", env, local_transport=True).value == "local:///x"
    chosen = choose_uri(None, "local:///s", env, local_transport=True)
    assert chosen.value == "local:///s" and chosen.source == "HPCBRIDGE_FLUX_URI"
    chosen = choose_uri(None, None, env, local_transport=True)
    assert chosen.value == "local:///env" and chosen.source == "FLUX_URI environment"
    assert choose_uri(None, None, None, local_transport=True).value is None


def test_local_flux_uri_is_ignored_over_ssh() -> None:
    chosen = choose_uri(None, None, "local:///mine", local_transport=False)
    assert chosen.value is None and chosen.source == "system instance"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("local:///tmp/flux-x/local-0", ("uri", "local:///tmp/flux-x/local-0")),
        ("ssh://vm/tmp/flux-x/local-0", ("uri", "ssh://vm/tmp/flux-x/local-0")),
        ("slurm:1234", ("target", "slurm:1234")),
        ("lsf:99", ("target", "lsf:99")),
        ("jobid:ƒCFKYzj", ("target", "jobid:ƒCFKYzj")),
        ("ƒCFKYzj", ("target", "jobid:ƒCFKYzj")),
        ("fCFKYzj", ("target", "jobid:fCFKYzj")),
        ("7381975040", ("target", "jobid:7381975040")),
    ],
)
def test_classify(value: str, expected: tuple) -> None:
    assert classify(value) == expected


@pytest.mark.parametrize("bad", ["nonsense", "http://x", "ƒ!!"])
def test_classify_rejects(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        classify(bad)


def test_local_form_on_the_same_host() -> None:
    # `flux uri --remote` answers ssh://HOST/...; on HOST itself that needs an
    # sshd on port 22, the local form needs nothing.
    assert (
        local_form("ssh://vm/tmp/flux-gHIKci/local-0", "vm") == "local:///tmp/flux-gHIKci/local-0"
    )
    assert (
        local_form("ssh://vm.example.org/tmp/f/local-0", "vm")
        == "ssh://vm.example.org/tmp/f/local-0"
    )
    assert local_form("ssh://user@vm/tmp/f/local-0", "vm.example.org") == "local:///tmp/f/local-0"
    assert local_form("ssh://node7/tmp/f/local-0", "login1") == "ssh://node7/tmp/f/local-0"
    assert local_form("local:///tmp/f/local-0", "vm") == "local:///tmp/f/local-0"
