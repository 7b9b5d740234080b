"""Builds the `bosun-operator` wheel: the pure-Python SDK (package `bosun`), its gRPC stubs
generated from the contract at build time, and the `bosun` controller binary.

Nothing generated is checked in: `build_py` runs grpcio-tools' protoc over
`../proto/bosun/v1/handler.proto` into `bosun/v1/` of the build, and the wheel requires the
grpcio and protobuf versions those stubs need (the gencode checks them at import). The
controller binary is built with cargo by setuptools-rust and installed as the `bosun` script.

Environment:
  BOSUN_PROTO_DIR    where the contract is (default: ../proto next to this file)
  BOSUN_CARGO_DEBUG  "1" builds the controller in cargo's debug profile (faster to build)
  BOSUN_BINARY       a `bosun` binary built beforehand, put into the wheel as it is instead of
                     running cargo (CI builds one static release binary for the wheel and the
                     image check: the Dockerfile's `cargo build` line)
  BOSUN_STUBS_ONLY   a folder: only generate the stubs there (`BOSUN_STUBS_ONLY=. python setup.py`)
"""

import inspect
import os
import pathlib
import re

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools_rust import RustBin, build_rust

HERE = pathlib.Path(__file__).resolve().parent
PROTO_DIR = pathlib.Path(os.environ.get("BOSUN_PROTO_DIR", HERE.parent / "proto"))
PROTO = "bosun/v1/handler.proto"


def version() -> str:
    """The workspace version from the top Cargo.toml, so the SDK and the controller agree."""
    text = (HERE.parent / "Cargo.toml").read_text()
    match = re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.S | re.M)
    if not match:
        raise RuntimeError("no [workspace.package] version in ../Cargo.toml")
    return match.group(1)


def generate_stubs(out_dir: pathlib.Path) -> None:
    """Runs protoc (from grpcio-tools) over the contract into `out_dir/bosun/v1/`."""
    from grpc_tools import protoc  # a build requirement
    import grpc_tools

    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    (out_dir / "bosun" / "v1").mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        PROTO,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_DIR / PROTO}")
    (out_dir / "bosun" / "v1" / "__init__.py").write_text('"""Stubs generated from bosun/v1/handler.proto at build time."""\n')


def dependencies() -> list:
    """grpcio and protobuf no older than the generator's: its gencode refuses older runtimes."""
    try:
        from importlib.metadata import version as installed
        tools = installed("grpcio-tools")
        proto = installed("protobuf")
    except Exception:  # metadata only, during an sdist or an egg_info without the build env
        return ["grpcio", "protobuf", "grpcio-health-checking"]
    major = int(proto.split(".")[0])
    # grpcio-health-checking has no gencode of ours and is not released with every patch of
    # grpcio-tools (1.85.4 came without it): the same minor will do.
    minor = ".".join(tools.split(".")[:2])
    return [
        f"grpcio>={tools}",
        f"grpcio-health-checking>={minor}",
        f"protobuf>={proto},<{major + 1}",
    ]


if os.environ.get("BOSUN_STUBS_ONLY"):
    # `BOSUN_STUBS_ONLY=. python setup.py`: the stubs into a source tree, for working on the
    # SDK without installing it (they are git-ignored there).
    generate_stubs(pathlib.Path(os.environ["BOSUN_STUBS_ONLY"]))
    raise SystemExit(0)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs(pathlib.Path(self.build_lib))


class BuildRust(build_rust):
    """Takes the `bosun` binary in `BOSUN_BINARY` as built, when it is set.

    setuptools-rust's `build_extension` is not a stable API: up to 1.12.0 it takes
    `(ext, forced_target_triple=None)`, from 1.12.1 `(ext)` alone, and from 1.13.0 it returns
    `(modules, out_dir)` instead of the modules (its `run_for_extension` unpacks the pair and
    hands `out_dir` to `install_extension`). Hence the passthrough of whatever that version's own
    caller passes, and a prebuilt result shaped as its `install_extension` takes it
    (tests/test_setup_build.py checks both against the installed setuptools-rust).
    """

    def build_extension(self, ext, *args, **kwargs):
        prebuilt = os.environ.get("BOSUN_BINARY")
        if not prebuilt:
            return super().build_extension(ext, *args, **kwargs)
        if not os.access(prebuilt, os.X_OK):
            raise RuntimeError(f"BOSUN_BINARY={prebuilt} is not an executable file")
        from setuptools_rust.build import _BuiltModule

        modules = [_BuiltModule("bosun", prebuilt)]
        # Keyed on install_extension, not on build_extension's arguments: 1.12.1 changed those and
        # kept the list. From 1.13.0 install_extension takes (self, ext, modules, out_dir), and a
        # prebuilt binary has no build script's OUT_DIR.
        if len(inspect.signature(build_rust.install_extension).parameters) > 3:
            return modules, None
        return modules


setup(
    version=version(),
    install_requires=dependencies(),
    cmdclass={"build_py": BuildWithStubs, "build_rust": BuildRust},
    rust_extensions=[
        RustBin(
            "bosun",
            path=str(HERE.parent / "controller" / "Cargo.toml"),
            cargo_manifest_args=["--locked"],
            features=["jemalloc"],
            debug=True if os.environ.get("BOSUN_CARGO_DEBUG") == "1" else None,
        )
    ],
    zip_safe=False,
)
