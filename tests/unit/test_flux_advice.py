"""doctor's next step for Flux bindings that cannot be used."""

from hpcbridge.schedulers.flux.checks import bindings_advice, release_advice


def test_a_dependency_the_found_bindings_lack_names_its_package() -> None:
    error = "No module named 'flux'; with /opt/flux/lib/flux/python3.11: No module named 'ply'"
    advice = bindings_advice(error, "0.88.0")
    assert advice.startswith("pip install ply ")
    assert "flux-python==0.88.0" in advice


def test_yaml_and_cffi_map_to_their_packages() -> None:
    assert bindings_advice("No module named 'yaml'", None).startswith("pip install pyyaml ")
    assert bindings_advice("No module named '_cffi_backend'", None).startswith("pip install cffi ")


def test_no_bindings_at_all_asks_for_the_brokers_release() -> None:
    assert bindings_advice("No module named 'flux'", "0.49.0") == "pip install flux-python==0.49.0"
    unknown = bindings_advice("No module named 'flux'", None)
    assert "flux-python==<the broker's version" in unknown


def test_a_missing_library_points_at_the_loader_path() -> None:
    advice = bindings_advice("OSError: libflux-core.so.2: cannot open shared object file", "0.88.0")
    assert "LD_LIBRARY_PATH" in advice and "flux-python==0.88.0" in advice


def test_the_cli_by_choice_needs_no_fix() -> None:
    assert (
        bindings_advice("the CLI driver was asked for (HPCBRIDGE_FLUX_DRIVER=cli)", "0.88.0") == ""
    )


def test_mixed_releases_say_both_versions_and_the_fix() -> None:
    text = release_advice("the Python bindings", "0.88.0", "0.49.0")
    assert "0.88.0" in text and "0.49.0" in text and "pip install flux-python==0.49.0" in text
    commands = release_advice("the flux commands", "0.88.0", "0.49.0")
    assert "HPCBRIDGE_FLUX_COMMAND" in commands and "0.49.0" in commands


def test_every_module_the_bindings_load_and_this_python_lacks_is_named_at_once() -> None:
    error = "No module named 'flux'; with /opt/flux/lib/flux/python3.11: No module named 'yaml'"
    absent = {"yaml", "ply"}
    advice = bindings_advice(error, "0.88.0", importable=lambda module: module not in absent)
    assert advice.startswith("pip install pyyaml ply (the bindings installed beside flux need them")
    alone = bindings_advice(error, "0.88.0", importable=lambda module: module != "yaml")
    assert alone.startswith("pip install pyyaml (the bindings installed beside flux need it;")
