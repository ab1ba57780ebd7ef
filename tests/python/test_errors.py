"""A failure inside xlens reaches Python as xlens.Error (a RuntimeError) carrying what the command
line prints for the same mistake: the graph session's messages escaped into one line, as `xlens
graph run` prints them (a node's name may hold a newline or an escape sequence), the compiler's
with their lines kept, as `xlens run` prints a parse error's source line and caret. Needs neither
TensorFlow nor JAX: the GraphDef is written byte by byte."""

import os
import subprocess

import pytest

import xlens


def cli_message(*args):
    """What the command line prints for a mistake, without "xlens: "; skips without the binary."""
    binary = os.environ.get("XLENS_BINARY")
    if not binary or not os.path.exists(binary):
        pytest.skip("XLENS_BINARY is not set")
    run = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.startswith("xlens: "), run.stderr
    return run.stderr[len("xlens: "):].rstrip("\n")


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def field(number, data):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def graph_def(*nodes):
    """A binary GraphDef of (name, op, {attr: AttrValue bytes}) nodes: GraphDef's node is field 1;
    NodeDef's name, op and attr map are 1, 2 and 5; a map entry's key and value are 1 and 2."""
    def node(name, op, attrs):
        return field(1, name) + field(2, op) + b"".join(
            field(5, field(1, key) + field(2, value)) for key, value in attrs.items())

    return b"".join(field(1, node(*n)) for n in nodes)


def test_error_is_a_runtime_error():
    assert issubclass(xlens.Error, RuntimeError)


def test_a_graph_error_is_the_command_lines_one_line(tmp_path):
    # A PyFunc's token (AttrValue.s, field 2) is quoted by the kernel as it is: a newline and an
    # escape sequence from the file reach the message, and only its escaping keeps them out of
    # the traceback, as `xlens graph run` keeps them off the terminal. Tin and Tout: empty lists.
    path = tmp_path / "hostile.pb"
    string, empty_list = (lambda s: field(2, s)), field(1, b"")  # AttrValue's s and list
    path.write_bytes(graph_def((b"py", b"PyFunc", {b"token": string(b"token\n\x1b[2J"),
                                                  b"Tin": empty_list, b"Tout": empty_list})))
    with xlens.Session(str(path)) as session:
        with pytest.raises(xlens.Error) as raised:
            session.run("py")
    message = str(raised.value)
    assert "the graph calls a Python function (token 'token\\n\\x1b[2J')" in message
    assert message == cli_message("graph", "run", str(path), "--target=py")


def test_a_parse_error_keeps_its_source_line_and_caret(tmp_path):
    text = "HloModule broken\nENTRY e { ROOT x = f32[] bogus() }\n"
    with pytest.raises(xlens.Error) as raised:
        xlens.compile_hlo(text)
    message = str(raised.value)
    assert message.splitlines()[0] == "<hlo text>:2:26: unknown opcode 'bogus'"
    assert message.splitlines()[-1].strip() == "^"
    path = tmp_path / "broken.hlo"
    path.write_text(text)
    expected = cli_message("run", str(path))
    assert message == expected.replace(str(path), "<hlo text>", 1)
