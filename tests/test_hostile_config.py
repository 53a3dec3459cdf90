"""Hostile configuration: the web config file, the settings and the mixin config (issue 9).

Each named test starts from an input that hung, crashed, blew up memory or printed a
multi-line or megabyte error before its fix, and states what happens now: one short line naming
the file and the key or setting, in bounded time and memory. Inputs that could hang or exhaust
memory run in a child process with a CPU and memory limit and a generous timeout, so a
regression fails the test instead of taking the suite down. The properties at the end feed
generated documents to each loader.
"""

from __future__ import annotations

import dataclasses
import json
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
from tls_support import openssl_certificate

from exporter.config.web import WebConfig, load_web_config
from exporter.errors import SettingsError
from exporter.settings import load_settings
from exporter.web.auth import BasicAuth
from mixin.config import DEFAULT, ConfigError, load_config
from mixin.files import generated_files

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
from exporter.config.web import load_web_config
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
    openssl_certificate(directory, "server", subject="127.0.0.1")
    openssl_certificate(directory, "encrypted", subject="127.0.0.1", passphrase="pw")
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


# -- settings: kafka_options, the token file, the TOML file, environment variables ---------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("CITATION_EXPORTER_"):
            monkeypatch.delenv(name)
    return monkeypatch


def _settings_refused(*named: str, **overrides: object) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings(**overrides)  # type: ignore[arg-type]
    message = str(refused.value)
    assert_one_short_line(message, *named)
    return message


def test_kafka_options_json_nested_fifty_thousand_deep_is_one_line(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """Was: RecursionError out of json.loads, a traceback."""
    clean_env.setenv(
        "CITATION_EXPORTER_KAFKA_OPTIONS", '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    )
    _settings_refused("kafka_options", "nested too deeply")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        pytest.param({"session_timeout_ms": "abc"}, "must be a whole number", id="str-for-int"),
        pytest.param({"session_timeout_ms": 10**30}, "must be from 0 to", id="int-beyond-int32"),
        pytest.param({"fetch_max_wait_ms": -1}, "must be from 0 to", id="negative"),
        pytest.param({"heartbeat_interval_ms": 3000.5}, "whole number", id="float-for-int"),
        pytest.param({"check_crcs": "no"}, "must be true or false", id="str-for-bool"),
        pytest.param({"session_timeout_ms": True}, "whole number", id="bool-for-int"),
        pytest.param({"compression_type": "bogus"}, "must be one of gzip", id="not-a-choice"),
        pytest.param({"isolation_level": 1}, "must be a string", id="int-for-str"),
        pytest.param({"client_rack": "r" * 40_000}, "longer than 1024", id="huge-string"),
        pytest.param({"max_poll_records": 0}, "must be from 1", id="aiokafka-raises"),
    ],
)
def test_a_kafka_option_aiokafka_would_choke_on_later_is_refused_at_start_up(
    clean_env: pytest.MonkeyPatch, options: dict[str, Any], named: str
) -> None:
    """Was: accepted; aiokafka takes them in its constructor and fails later, in a fetch or a
    heartbeat (or raises in the constructor, inside the runtime), far from the setting."""
    clean_env.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", json.dumps(options))
    _settings_refused("kafka_options", named)


def test_thousands_of_bad_kafka_options_are_one_short_line(clean_env: pytest.MonkeyPatch) -> None:
    """Was: every key listed with its did-you-mean: a message of megabytes."""
    options = {f"option_{i}_{'x' * 50}": 1 for i in range(2000)} | {"k" * 60_000: 1}
    clean_env.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", json.dumps(options))
    _settings_refused("kafka_options", "and 1996 more")


def test_kafka_options_from_toml_with_nested_tables_are_named(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Held up before."""
    path = tmp_path / "c.toml"
    path.write_text("[kafka_options]\nsession_timeout_ms = 45000\n[kafka_options.nested]\na = 1\n")
    _settings_refused("kafka_options", "'nested' is dict", config_file=path)


def test_valid_kafka_options_still_pass(clean_env: pytest.MonkeyPatch) -> None:
    options = {"session_timeout_ms": 45000, "check_crcs": False, "compression_type": "gzip"}
    clean_env.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", json.dumps(options))
    assert load_settings().kafka_options == options


LOAD_SETTINGS = """
import sys
from pathlib import Path
from exporter.settings import SettingsError, load_settings
try:
    load_settings({config!r} and Path({config!r}), **{overrides!r})
except SettingsError as exc:
    print(exc)
    sys.exit(2)
print("loaded")
"""


def _token_overrides(path: Path) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_file": str(path),
    }


def test_a_fifo_as_the_token_file_is_refused_without_waiting(tmp_path: Path) -> None:
    """Was: read_text() of a FIFO waited for a writer, at start-up and then on the event loop
    at every new connection."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    code = LOAD_SETTINGS.format(config=None, overrides=_token_overrides(fifo))
    done = bounded_python(code)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), "sasl_oauth_token_file", "FIFO")


def test_a_gigabyte_token_file_is_not_read_whole(tmp_path: Path) -> None:
    """Was: read whole: a MemoryError under a 512 MiB limit."""
    token = tmp_path / "token"
    with token.open("wb") as sparse:
        sparse.truncate(1 << 30)
    code = LOAD_SETTINGS.format(config=None, overrides=_token_overrides(token))
    done = bounded_python(code, memory_bytes=512 << 20)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), "sasl_oauth_token_file", "larger than 65536")


@pytest.mark.parametrize(
    ("content", "named"),
    [
        pytest.param(b"eyJhbGciOi\x01auth=Bearer x", "characters a bearer token", id="sasl-sep"),
        pytest.param(b"two\nlines", "characters a bearer token", id="newline"),
        pytest.param(b"\xff\xfe\x00binary", "bytes a bearer token", id="binary"),
        pytest.param(b"  \n", "is empty", id="empty"),
    ],
)
def test_a_token_file_a_bearer_token_cannot_be_is_refused(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, content: bytes, named: str
) -> None:
    """Was: any text accepted; a \\x01 in it would add fields to the OAUTHBEARER login
    message (binary and empty files held up)."""
    token = tmp_path / "token"
    token.write_bytes(content)
    _settings_refused("sasl_oauth_token_file", named, **_token_overrides(token))


def test_a_token_file_swapped_for_a_fifo_keeps_the_token_read_before(tmp_path: Path) -> None:
    """Was: the token provider, on the event loop, opened the FIFO and waited for a writer:
    everything stopped. Now it keeps the token it read before (in a child: a hang fails)."""
    token = tmp_path / "token"
    code = f"""
import asyncio, os
from pathlib import Path
from exporter.kafka.clients import TokenFile
token = Path({str(token)!r})
token.write_text("abc.def-ghi\\n")
provider = TokenFile(token)
assert asyncio.run(provider.token()) == "abc.def-ghi"
token.unlink()
os.mkfifo(token)
print(asyncio.run(provider.token()))
"""
    done = bounded_python(code)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "abc.def-ghi"


def test_a_gigabyte_config_file_is_not_read_whole(tmp_path: Path) -> None:
    """Was: tomllib read the whole file: a MemoryError under a 512 MiB limit."""
    path = tmp_path / "c.toml"
    with path.open("wb") as sparse:
        sparse.truncate(1 << 30)
    done = bounded_python(
        LOAD_SETTINGS.format(config=str(path), overrides={}), memory_bytes=512 << 20
    )
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), str(path), "larger than")


def test_a_fifo_as_the_config_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    """Held up before (is_file() said no), as "does not exist"."""
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    done = bounded_python(LOAD_SETTINGS.format(config=str(fifo), overrides={}))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), str(fifo), "FIFO")


@pytest.mark.parametrize(
    ("content", "named"),
    [
        pytest.param(b"threshold = " + b"[" * 5000 + b"]" * 5000, "nested too deeply", id="deep"),
        pytest.param(b'group_id = "\xff"', "is not UTF-8", id="not-utf8"),
        pytest.param(b"metrics_port = " + b"9" * 5000, "cannot convert", id="5000-digits"),
        pytest.param(b"group_id = ", "is not valid TOML", id="not-toml"),
    ],
)
def test_a_config_file_that_is_not_toml_is_one_line_naming_it(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, content: bytes, named: str
) -> None:
    """Was: RecursionError or ValueError out of tomllib (tracebacks), and a UTF-8 error that
    did not name the file."""
    path = tmp_path / "c.toml"
    path.write_bytes(content)
    _settings_refused(str(path), named, config_file=path)


def test_a_dotted_key_thousands_deep_is_one_line(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("a." * 20_000 + "b = 1\n")
    _settings_refused("unknown setting 'a'", config_file=path)


def test_a_path_setting_of_a_hundred_kilobytes_is_one_short_line(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """Was: OSError (ENAMETOOLONG) out of Path.exists, reported as "cannot read the config
    file" with all 100,000 characters."""
    clean_env.setenv("CITATION_EXPORTER_SECURITY_PROTOCOL", "SSL")
    clean_env.setenv("CITATION_EXPORTER_SSL_CAFILE", "c" * 100_000)
    _settings_refused("ssl_cafile", "File name too long", "(100000 characters)")


def test_many_unknown_variables_are_one_short_line(clean_env: pytest.MonkeyPatch) -> None:
    """Was: every variable listed: a message as long as the environment."""
    for i in range(300):
        clean_env.setenv(f"CITATION_EXPORTER_BOGUS_{i:03}_{'X' * 200}", "1")
    _settings_refused("unknown variable", "and 295 more")


def test_an_encrypted_kafka_client_key_is_refused_without_a_prompt(certs: Path) -> None:
    """Was: OpenSSL read the passphrase from standard input: start-up waited for ever."""
    overrides = {
        "security_protocol": "SSL",
        "ssl_certfile": str(certs / "encrypted.crt"),
        "ssl_keyfile": str(certs / "encrypted.key"),
    }
    code = LOAD_SETTINGS.format(config=None, overrides=overrides)
    done = bounded_python(code, stdin=subprocess.PIPE)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stdout.strip(), "ssl_keyfile", "is encrypted")


_json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.floats(),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)
_option_names = st.one_of(
    st.sampled_from(
        [
            "session_timeout_ms",
            "check_crcs",
            "compression_type",
            "isolation_level",
            "client_rack",
            "max_poll_records",
            "group_id",
            "acks",
            "api_version",
            "fetch_max_bytes",
        ]
    ),
    st.text(max_size=20),
)


@HOSTILE_SETTINGS
@given(
    options=st.one_of(
        st.dictionaries(_option_names, _json_values, max_size=6).map(json.dumps),
        _json_values.map(json.dumps),
        st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE-+ntrufalsNIy\\ '), max_size=200),
    )
)
def test_any_kafka_options_json_is_settings_or_one_short_line(
    clean_env: pytest.MonkeyPatch, options: str
) -> None:
    clean_env.setenv("CITATION_EXPORTER_KAFKA_OPTIONS", options)
    started = time.process_time()
    try:
        loaded = load_settings()
    except SettingsError as exc:
        assert_one_short_line(str(exc), "kafka_options")
    else:
        assert all(
            isinstance(value, bool | int | float | str) for value in loaded.kafka_options.values()
        )
    assert time.process_time() - started < STALL_CPU_SECONDS


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    return str(value)


_setting_names = st.sampled_from(
    [
        "bootstrap_servers",
        "threshold",
        "metrics_port",
        "kafka_options",
        "sources",
        "bogus",
        "web_config_file",
    ]
)


@HOSTILE_SETTINGS
@given(
    document=st.one_of(
        st.dictionaries(_setting_names, _json_values, max_size=4).map(
            lambda table: "".join(f"{k} = {_toml_value(v)}\n" for k, v in table.items())
        ),
        st.text(alphabet=st.sampled_from("[]{}=\"'.,=#\n abc123\\"), max_size=200),
    )
)
def test_any_toml_config_file_is_settings_or_one_short_line_naming_it(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, document: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(document.encode("utf-8", "surrogatepass"))
    started = time.process_time()
    try:
        load_settings(path)
    except SettingsError as exc:
        assert_one_short_line(str(exc))
    assert time.process_time() - started < STALL_CPU_SECONDS


# -- the mixin config ----------------------------------------------------------------------------

RUN_MIXIN = """
import sys
from mixin.__main__ import main
sys.exit(main(["--config", {path!r}, "--out", {out!r}]))
"""


def _mixin_refused(path: Path, *named: str) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message.startswith(str(path)), message[:300]
    assert_one_short_line(message, *named)
    return message


def _mixin_file(directory: Path, text: str | bytes, name: str = "mixin.yaml") -> Path:
    path = directory / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_a_mixin_config_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Was: the bomb reached "expected a string, got {value!r}" and filled memory."""
    path = _mixin_file(tmp_path, f"job: {_laughs()}\n")
    done = bounded_python(RUN_MIXIN.format(path=str(path), out=str(tmp_path / "out")))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stderr.strip(), str(path), "aliases are expanded")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "named"),
    [
        pytest.param(lambda p: p.write_bytes(b"job: \xff\n"), "is not UTF-8", id="not-utf8"),
        pytest.param(
            lambda p: p.write_text("job: " + "[" * 10_000 + "]" * 10_000), "nested", id="deep"
        ),
        pytest.param(
            lambda p: p.write_text("1: x\njbo: y\n"), "unknown key 1, 'jbo'", id="int-key"
        ),
        pytest.param(
            lambda p: p.write_text("drift_for: " + "9" * 5000 + "m\n"), "drift_for", id="digits"
        ),
        pytest.param(
            lambda p: p.write_text("".join(f"k{i}{'x' * 100}: 1\n" for i in range(500))),
            "and 495 more",
            id="many-unknown",
        ),
    ],
)
def test_a_mixin_config_that_broke_the_loader_is_one_line(
    tmp_path: Path, make: Any, named: str
) -> None:
    """Was: UnicodeDecodeError, RecursionError, TypeError (sorting 1 and 'jbo'), ValueError
    (int of 5,000 digits): tracebacks from python -m mixin; 500 unknown keys all listed."""
    path = tmp_path / "mixin.yaml"
    make(path)
    _mixin_refused(path, named)
    done = bounded_python(RUN_MIXIN.format(path=str(path), out=str(tmp_path / "out")))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stderr.strip(), named)


def test_a_fifo_as_the_mixin_config_is_refused_without_waiting(tmp_path: Path) -> None:
    """Was: read_text() of a FIFO waited for a writer."""
    fifo = tmp_path / "mixin.toml"
    os.mkfifo(fifo)
    done = bounded_python(RUN_MIXIN.format(path=str(fifo), out=str(tmp_path / "out")))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stderr.strip(), str(fifo), "FIFO")


def test_a_gigabyte_mixin_config_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "mixin.toml"
    with path.open("wb") as sparse:
        sparse.truncate(1 << 30)
    code = RUN_MIXIN.format(path=str(path), out=str(tmp_path / "out"))
    done = bounded_python(code, memory_bytes=512 << 20)
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stderr.strip(), str(path), "larger than 65536")


def test_a_runbook_url_that_pads_to_a_gigabyte_is_refused(tmp_path: Path) -> None:
    """Was: str.format filled {alert:>1000000000} in: a gigabyte per alert, or a MemoryError."""
    path = _mixin_file(tmp_path, 'runbook_url = "https://x/{alert:>1000000000}"\n', "m.toml")
    done = bounded_python(RUN_MIXIN.format(path=str(path), out=str(tmp_path / "out")))
    assert done.returncode == 2, done.stderr[-500:]
    assert_one_short_line(done.stderr.strip(), "runbook_url", "only {alert} and {anchor}")


@pytest.mark.parametrize(
    "url", ["https://x/{alert.__class__}", "https://x/{alert!r}", "https://x/{anchor[0]}", "x/{"]
)
def test_a_runbook_url_may_fill_in_only_the_alert_and_its_anchor(tmp_path: Path, url: str) -> None:
    """Was: attribute access, conversions and indexing were filled in (a runbook link to
    "<class 'str'>")."""
    _mixin_refused(_mixin_file(tmp_path, f"runbook_url: '{url}'\n"), "runbook_url")


@pytest.mark.parametrize(
    ("labels", "named"),
    [
        pytest.param({"role": "x"}, "'role' is set by the manifests", id="role"),
        pytest.param({"bad key!": "x"}, "not a Kubernetes label key", id="bad-key"),
        pytest.param({"release": "a b"}, "not a Kubernetes label value", id="bad-value"),
        pytest.param({"release": "v" * 64}, "not a Kubernetes label value", id="long-value"),
    ],
)
def test_operator_labels_kubernetes_would_refuse_are_refused(
    tmp_path: Path, labels: dict[str, str], named: str
) -> None:
    """Was: "role" and "name" crashed rendering (TypeError: multiple values for a keyword
    argument of _metadata); the others rendered manifests the API server refuses."""
    _mixin_refused(_mixin_file(tmp_path, yaml.safe_dump({"operator_labels": labels})), named)


def test_operator_labels_named_like_the_renderers_arguments_are_rendered(tmp_path: Path) -> None:
    """Was refused to avoid a crash (the labels were keyword arguments of _metadata); now they
    are passed as a mapping, so "name" and "config" are ordinary labels."""
    from mixin.config import load_config
    from mixin.kubernetes import service_monitor

    path = _mixin_file(tmp_path, yaml.safe_dump({"operator_labels": {"name": "a", "config": "b"}}))
    labels = service_monitor(load_config(path))["metadata"]["labels"]
    assert labels["name"] == "a" and labels["config"] == "b"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("job", 'citations"} or vector(1) #'),
        ("job", "citations\\"),
        ("job", "citations\nprod"),
        ("job", "a" * 64),
        ("namespace", "Prod"),
        ("aggregation_labels", ["__name__"]),
        ("aggregation_labels", ['cluster"']),
        ("image", "exporter:1\nkind: Secret"),
        ("dashboard_title", "Citations\u202e"),
        ("bootstrap_servers", "k" * 2000),
        ("memory_limit", "2Gi\n"),
        ("scrape_interval", "15s; drop"),
    ],
)
def test_values_that_would_break_promql_or_manifests_are_refused(
    tmp_path: Path, key: str, value: Any
) -> None:
    """The job, labels and durations held up before (checked by pattern); a newline or a
    control character in the free-text settings did not."""
    _mixin_refused(_mixin_file(tmp_path, yaml.safe_dump({key: value})), key)


_mixin_keys = st.sampled_from([*(f.name for f in dataclasses.fields(DEFAULT)), "jbo"])


@HOSTILE_SETTINGS
@given(
    document=st.one_of(
        st.dictionaries(st.one_of(_mixin_keys, _scalars), _values, max_size=3).map(
            lambda d: yaml.safe_dump(d, allow_unicode=True)
        ),
        st.dictionaries(_mixin_keys, st.one_of(_names, st.text(max_size=30)), max_size=3).map(
            lambda d: yaml.safe_dump(d, allow_unicode=True)
        ),
        st.text(alphabet=st.sampled_from("[]{}&*!:,-?|>'\" \n\tab1$%{}"), max_size=200),
    )
)
def test_any_mixin_config_renders_or_is_one_short_line_naming_the_file(
    tmp_path: Path, document: str
) -> None:
    path = _mixin_file(tmp_path, document)
    started = time.process_time()
    try:
        config = load_config(path)
    except ConfigError as exc:
        assert str(exc).startswith(str(path))
        assert_one_short_line(str(exc))
    else:
        files = generated_files(config)
        rules = yaml.safe_load(files["rules/citation-drift.rules.yml"])
        assert rules["groups"]
        assert f'job="{config.job}"' in files["rules/citation-drift.rules.yml"]
    assert time.process_time() - started < STALL_CPU_SECONDS
