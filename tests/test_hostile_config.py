"""Hostile configuration: the web config file, the settings and the mixin config (issue 9).

Each named test starts from an input that hung, crashed, blew up memory or printed a
multi-line or megabyte error before its fix, and states what happens now: one short line naming
the file and the key or setting, in bounded time and memory. Inputs that could hang or exhaust
memory run in a child process with a CPU and memory limit and a generous timeout, so a
regression fails the test instead of taking the suite down. The properties at the end feed
generated documents to each loader.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.errors import SettingsError
from exporter.web.auth import BasicAuth
from exporter.web.config import WebConfig, load_web_config

REPO = Path(__file__).resolve().parent.parent
# "One short error": bytes of UTF-8.
SHORT = 1000
# CPU seconds one generated input may take: a hang detector, not a performance figure.
STALL_CPU_SECONDS = 10.0
HOSTILE_SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

# A valid bcrypt hash of "secret" at cost 4 (the salt's last character is one of .Oeu).
GOOD_HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(4)).decode()


def assert_one_short_line(message: str, *named: str) -> None:
    assert "\n" not in message and "\r" not in message, message[:300]
    assert len(message.encode()) < SHORT, message[:300]
    for name in named:
        assert name in message, (name, message[:300])


def bounded_python(
    code: str, *, memory_bytes: int = 1 << 30, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child with at most ``memory_bytes`` of address space and 60 CPU
    seconds; a hang ends at the timeout and fails the test."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env = {k: v for k, v in env.items() if not k.startswith("CITATION_EXPORTER_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limits,
        check=False,
    )


LOAD_WEB_CONFIG = """
import sys
from pathlib import Path
from exporter.errors import SettingsError
from exporter.web.config import load_web_config
try:
    load_web_config(Path(sys.argv[-1] if len(sys.argv) > 1 else {path!r}))
except SettingsError as exc:
    print(exc)
    sys.exit(2)
print("loaded")
"""


def _web_config(directory: Path, text: str | bytes, name: str = "web.yml") -> Path:
    path = directory / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _refused(path: Path, *named: str) -> str:
    with pytest.raises(SettingsError) as refused:
        load_web_config(path)
    message = str(refused.value)
    assert message.startswith(f"web config file {path}"), message[:300]
    assert_one_short_line(message, *named)
    return message


def _laughs(levels: int = 9) -> str:
    """A billion laughs in YAML flow style: 9**levels items from a few hundred bytes."""
    anchors = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "[" + ", ".join(anchors) + "]"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate with its key, plain and encrypted."""
    directory = tmp_path_factory.mktemp("certs")
    (directory / "openssl.cnf").write_text("[req]\ndistinguished_name = dn\n[dn]\n")
    for name, encryption in (("server", ["-nodes"]), ("encrypted", ["-passout", "pass:pw"])):
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                *encryption,
                "-days",
                "1",
                "-config",
                "openssl.cnf",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                f"{name}.key",
                "-out",
                f"{name}.crt",
            ],
            cwd=directory,
            check=True,
            capture_output=True,
            timeout=30,
        )
    return directory


# -- the web configuration file ----------------------------------------------------------------


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Was: the billion laughs reached an error message's repr and filled memory."""
    path = _web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: {_laughs()}\n",
    )
    done = bounded_python(LOAD_WEB_CONFIG.format(path=str(path)), memory_bytes=1 << 30)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), str(path), "aliases are expanded")


def test_an_alias_that_contains_itself_is_refused(tmp_path: Path) -> None:
    """Held up before (the recursive value failed a later check); now named for what it is."""
    _refused(_web_config(tmp_path, "basic_auth_users: &a {u: *a}\n"), "refers to itself")


def test_yaml_nested_thousands_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    """Was: RecursionError out of PyYAML's composer, a traceback."""
    path = _web_config(tmp_path, "basic_auth_users: " + "[" * 20_000 + "]" * 20_000 + "\n")
    _refused(path, "nested deeper than")


def test_a_gigabyte_web_config_is_not_read_whole(tmp_path: Path) -> None:
    """Was: read whole (a sparse file costs no disk): a MemoryError under a 512 MiB limit."""
    path = tmp_path / "web.yml"
    with path.open("wb") as sparse:
        sparse.truncate(1 << 30)
    done = bounded_python(LOAD_WEB_CONFIG.format(path=str(path)), memory_bytes=512 << 20)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), str(path), "is larger than 65536 bytes")


@pytest.mark.parametrize("where", ["web config file", "cert_file"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, where: str) -> None:
    """Was: open() of a FIFO (or /dev/stdin) as the web config waited for ever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = fifo
    if where == "cert_file":
        path = _web_config(tmp_path, "tls_server_config:\n  cert_file: fifo\n  key_file: fifo\n")
    done = bounded_python(LOAD_WEB_CONFIG.format(path=str(path)))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), str(fifo), "not a regular file but a FIFO")


def test_standard_input_as_the_web_config_is_refused_at_once(tmp_path: Path) -> None:
    """/dev/stdin held open by a parent that never writes: refused, not waited on."""
    code = LOAD_WEB_CONFIG.format(path="/dev/stdin")
    done = bounded_python(code, stdin=subprocess.PIPE)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), "/dev/stdin", "not a regular file")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        pytest.param(lambda p: p.mkdir(), "is not a regular file but a directory", id="directory"),
        pytest.param(lambda p: p.symlink_to(p), "cannot be read: Too many levels", id="loop"),
        pytest.param(lambda p: p.write_bytes(b"basic_auth_users:\n  \xff\xfe: x\n"), "not UTF-8"),
        pytest.param(lambda p: p.write_bytes(b"a: \x00\n"), "not valid YAML", id="nul"),
    ],
)
def test_what_is_not_a_yaml_file_is_one_line(tmp_path: Path, make: Any, named: str) -> None:
    """These held up before (one line, if with the path twice); now each says what it is."""
    path = tmp_path / "web.yml"
    make(path)
    _refused(path, named)


def test_an_integer_of_thousands_of_digits_is_one_line(tmp_path: Path) -> None:
    """Was: ValueError (int digits limit) out of PyYAML's constructor, a traceback."""
    path = _web_config(tmp_path, "tls_server_config:\n  min_version: " + "7" * 5000 + "\n")
    _refused(path, "cannot convert")


@pytest.mark.parametrize(
    ("user", "named"),
    [
        pytest.param('"prom\\netheus"', "basic_auth_users.prom\\netheus", id="newline"),
        pytest.param('"\\u202eevil"', "basic_auth_users.\\u202eevil", id="bidi-override"),
        # a key of over 1024 characters must be an explicit one
        pytest.param('? "' + "u" * 50_000 + '"\n  ', "(50000 characters)", id="fifty-kilobytes"),
    ],
)
def test_a_user_name_is_quoted_on_one_short_line(tmp_path: Path, user: str, named: str) -> None:
    """Was: the name verbatim in the message: a newline split it, 50 KB made it 50 KB."""
    _refused(_web_config(tmp_path, f"basic_auth_users:\n  {user}: not-a-hash\n"), named)


def test_a_key_that_is_not_a_string_is_named(tmp_path: Path) -> None:
    path = _web_config(tmp_path, f"basic_auth_users:\n  yes: '{GOOD_HASH}'\n")
    _refused(path, "the key True is not a string (quote it)")


def test_a_bcrypt_cost_that_would_take_months_is_refused_at_load(tmp_path: Path) -> None:
    """Was: accepted; BasicAuth then hashed its decoy at cost 31 (months) at start-up, and every
    check of that user's password took as long, holding the lock all checks share."""
    hashed = "$2b$31$" + GOOD_HASH[7:]
    message = _refused(
        _web_config(tmp_path, f"basic_auth_users:\n  u: '{hashed}'\n"), "bcrypt cost 31"
    )
    assert hashed not in message


def test_a_hash_whose_salt_bcrypt_refuses_is_refused_at_load(tmp_path: Path) -> None:
    """Was: accepted by the pattern, then bcrypt raised "Invalid salt" at every check, so that
    user could never log in and nothing said why."""
    hashed = GOOD_HASH[:28] + "a" + GOOD_HASH[29:]  # 22nd salt character: not one of .Oeu
    with pytest.raises(ValueError, match="Invalid salt"):
        bcrypt.checkpw(b"secret", hashed.encode())
    _refused(_web_config(tmp_path, f"basic_auth_users:\n  u: '{hashed}'\n"), "not a bcrypt hash")


def test_a_well_formed_hash_still_lets_its_user_in(tmp_path: Path) -> None:
    config = load_web_config(_web_config(tmp_path, f"basic_auth_users:\n  ü: '{GOOD_HASH}'\n"))
    assert config.basic_auth_users == {"ü": GOOD_HASH}
    assert BasicAuth(config.basic_auth_users).allows(
        "Basic " + __import__("base64").b64encode("ü:secret".encode()).decode()
    )


def test_a_certificate_path_too_long_for_the_file_system_is_one_line(tmp_path: Path) -> None:
    """Was: OSError (ENAMETOOLONG) out of Path.is_file, a traceback with the 5,000 characters."""
    path = _web_config(tmp_path, f"tls_server_config:\n  cert_file: {'c' * 5000}\n  key_file: k\n")
    _refused(path, "tls_server_config.cert_file", "File name too long", "(5")


def test_a_certificate_that_is_a_symlink_loop_or_a_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "loop.crt").symlink_to(tmp_path / "loop.crt")
    (tmp_path / "dir.key").mkdir()
    tls = "tls_server_config:\n  cert_file: {}\n  key_file: {}\n"
    _refused(_web_config(tmp_path, tls.format("loop.crt", "k")), "cert_file", "Too many levels")
    _refused(_web_config(tmp_path, tls.format("loop.crt", "dir.key")), "cert_file")


def test_a_huge_ca_bundle_is_refused_by_its_size(certs: Path, tmp_path: Path) -> None:
    """OpenSSL gave up early on a gigabyte of zeros, but reads a gigabyte of certificates whole;
    no CA bundle comes close to 1 MiB."""
    bundle = tmp_path / "ca.crt"
    with bundle.open("wb") as sparse:
        sparse.truncate(1 << 30)
    text = (
        f"tls_server_config:\n  cert_file: {certs / 'server.crt'}\n"
        f"  key_file: {certs / 'server.key'}\n  client_ca_file: {bundle}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
    )
    _refused(_web_config(tmp_path, text), "client_ca_file", "is larger than 1048576 bytes")


def test_a_certificate_that_is_not_pem_is_one_line(certs: Path, tmp_path: Path) -> None:
    """Held up before."""
    (tmp_path / "junk.crt").write_bytes(os.urandom(4096))
    text = f"tls_server_config:\n  cert_file: junk.crt\n  key_file: {certs / 'server.key'}\n"
    _refused(_web_config(tmp_path, text), "not a usable certificate and key")


def test_an_encrypted_key_is_refused_without_asking_for_its_passphrase(
    certs: Path, tmp_path: Path
) -> None:
    """Was: OpenSSL asked for the passphrase on the terminal, or read it from standard input:
    with a parent that holds stdin open and writes nothing, start-up waited for ever."""
    text = "tls_server_config:\n  cert_file: encrypted.crt\n  key_file: encrypted.key\n"
    path = _web_config(certs, text, "encrypted.yml")
    done = bounded_python(LOAD_WEB_CONFIG.format(path=str(path)), stdin=subprocess.PIPE)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), "key_file", "is encrypted")


# -- properties ----------------------------------------------------------------------------------

_names = st.sampled_from(
    [
        "tls_server_config",
        "basic_auth_users",
        "cert_file",
        "key_file",
        "client_ca_file",
        "client_auth_type",
        "min_version",
        "max_version",
        "u",
        "prometheus",
        "NoClientCert",
        "RequireAndVerifyClientCert",
        "TLS12",
        "TLS13",
        "server.crt",
        "server.key",
        GOOD_HASH,
        "$2b$31$" + GOOD_HASH[7:],
    ]
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True),
    _names,
    st.text(max_size=40),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(_names, _scalars), inner, max_size=4)
    ),
    max_leaves=20,
)


def _hostile_yaml(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["dumped", "text", "bytes", "bomb", "deep", "anchors"]))
    if kind == "dumped":
        document = draw(st.dictionaries(_names, _values, max_size=3))
        try:
            return yaml.safe_dump(document, allow_unicode=True).encode()
        except yaml.YAMLError:
            return b""
    if kind == "text":
        return draw(st.text(alphabet=st.sampled_from("[]{}&*!:,-?|>'\" \n\tab1$%@`#\\"))).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "bomb":
        key = draw(_names)
        return f"{key}: {_laughs(draw(st.integers(1, 12)))}\n".encode()
    if kind == "deep":
        depth = draw(st.integers(1, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("- ", "")]))
        return (f"{draw(_names)}: " + opener * depth + "x" + closer * depth).encode()
    inner = draw(_names)
    return f"basic_auth_users: &x {{{inner}: *x}}\ntls_server_config: *x\n".encode()


@HOSTILE_SETTINGS
@given(data=st.data())
def test_any_web_config_loads_or_is_one_short_line_naming_the_file(
    tmp_path: Path, data: st.DataObject
) -> None:
    path = _web_config(tmp_path, _hostile_yaml(data.draw))
    started = time.process_time()
    try:
        config = load_web_config(path)
    except SettingsError as exc:
        message = str(exc)
        assert message.startswith(f"web config file {path}")
        assert_one_short_line(message)
    else:
        assert isinstance(config, WebConfig)
        assert all(isinstance(name, str) for name in config.basic_auth_users)
    assert time.process_time() - started < STALL_CPU_SECONDS
