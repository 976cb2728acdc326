"""The ``skillclassics`` command line: ``verify`` exit statuses and messages."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from skillclassics.rules.v1 import rules_pb2

from clients.cli.main import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    Screen,
    _clock,
    _table_setup,
    build_parser,
    main,
)
from libs.fairness import DrawSpec, Proof, build_proof

REPO = Path(__file__).resolve().parents[2]
SEED = bytes(range(32))


@pytest.fixture
def proof() -> Proof:
    draws = [("dice", i, DrawSpec.dice(2)) for i in range(40)] + [
        ("deck", i, DrawSpec.shuffle(52)) for i in range(2)
    ]
    return build_proof(SEED, "m-1", {0: b"alice", 1: b"bob"}, draws)


@pytest.fixture
def proof_file(tmp_path: Path, proof: Proof) -> Path:
    path = tmp_path / "proof.json"
    path.write_text(proof.to_json(), encoding="utf-8")
    return path


def write(tmp_path: Path, text: str, name: str = "bad.json") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_verify_ok(proof_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(proof_file)]) == EXIT_OK == 0
    out, err = capsys.readouterr()
    assert out == "OK: commitment matches; 42 draws in 2 streams reproduced exactly\n"
    assert err == ""


def test_verify_reads_standard_input(
    proof: Proof, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(proof.to_json().encode("utf-8"))))
    assert main(["verify", "-"]) == 0
    assert capsys.readouterr().out.startswith("OK: commitment matches; 42 draws")


def test_verify_a_tampered_draw(tmp_path: Path, proof: Proof, capsys: pytest.CaptureFixture[str]) -> None:
    data = proof.to_dict()
    draw = data["draws"][5]  # ("dice", 3)
    assert (draw["stream"], draw["index"]) == ("dice", 3)
    recorded = [draw["values"][0] % 6 + 1, draw["values"][1]]
    expected = list(draw["values"])
    draw["values"] = recorded
    assert main(["verify", write(tmp_path, json.dumps(data))]) == EXIT_FAILED == 1
    out, err = capsys.readouterr()
    assert out == (
        "FAIL: draw stream 'dice' index 3 (dice, count 2, bound 0) does not match: "
        f"value #0 expected {expected[0]}, recorded {recorded[0]}; "
        f"expected [{expected[0]}, {expected[1]}], recorded [{recorded[0]}, {recorded[1]}]\n"
    )
    assert err == ""


def test_verify_a_wrong_commitment(tmp_path: Path, proof: Proof, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = replace(proof, commitment="ab" * 32)
    assert main(["verify", write(tmp_path, wrong.to_json())]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        "FAIL: commitment does not match the server seed: the proof commits to " + "ab" * 32
    )


def test_verify_a_gap(tmp_path: Path, proof: Proof, capsys: pytest.CaptureFixture[str]) -> None:
    data = proof.to_dict()
    del data["draws"][10]  # ("dice", 8)
    assert main(["verify", write(tmp_path, json.dumps(data))]) == 1
    assert capsys.readouterr().out == (
        "FAIL: draw stream 'dice' index 9 leaves a gap: the stream's next index should be 8\n"
    )


def test_verify_against_what_the_player_recorded(
    proof_file: Path, proof: Proof, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = [
        "verify",
        str(proof_file),
        "--commitment",
        proof.commitment.upper(),
        "--client-seed",
        b"alice".hex(),
        "--seat",
        "0",
        "--draw",
        "dice:39",
        "--draw",
        "deck:1",
    ]
    assert main(expected) == EXIT_OK
    assert capsys.readouterr().out == (
        "OK: commitment matches; 42 draws in 2 streams reproduced exactly; it is the commitment published "
        "before the match; your client seed is in; all 2 draws the match used are in\n"
    )
    assert main(["verify", str(proof_file), "--client-seed", b"bob".hex()]) == EXIT_OK  # any seat
    capsys.readouterr()


def test_verify_fails_on_another_commitment(
    proof_file: Path, proof: Proof, capsys: pytest.CaptureFixture[str]
) -> None:
    published = "cd" * 32
    assert main(["verify", str(proof_file), "--commitment", published]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out == (
        f"FAIL: the proof commits to {proof.commitment}, not to {published}, the commitment published "
        "before the match: this is not the random stream the match was promised\n"
    )
    assert err == ""


def test_verify_fails_without_the_players_client_seed(
    proof_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(proof_file), "--client-seed", b"alice".hex(), "--seat", "1"]) == EXIT_FAILED
    assert capsys.readouterr().out == (
        "FAIL: your client seed 616c696365 is not in the proof: it has another seed for seat 1 (626f62)\n"
    )
    assert main(["verify", str(proof_file), "--client-seed", "00ff"]) == EXIT_FAILED
    assert capsys.readouterr().out == "FAIL: your client seed 00ff is not in the proof (for any seat)\n"


def test_verify_fails_on_a_draw_missing_from_the_proof(
    proof_file: Path, proof: Proof, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["verify", str(proof_file), "--draw", "dice:40", "--draw", "shuffle:0", "--commitment", "0" * 64]
    assert main(args) == EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f"FAIL: the proof commits to {proof.commitment}, not to {'0' * 64}, the commitment published "
        "before the match: this is not the random stream the match was promised",
        "FAIL: the match used draw stream 'dice' index 40, but the proof does not have it",
        "FAIL: the match used draw stream 'shuffle' index 0, but the proof does not have it",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--commitment", "abc"], "--commitment must be 64 hex digits (a SHA-256), got 'abc'"),
        (["--client-seed", "xyz"], "--client-seed must be hex digits, got 'xyz'"),
        (["--client-seed", "00" * 65], "--client-seed must be 1 to 64 bytes, got 65"),
        (["--seat", "0"], "--seat goes with --client-seed (the seat whose seed it is)"),
        (["--draw", "dice"], "--draw must be STREAM:INDEX (e.g. shuffle:0), got 'dice'"),
        (["--draw", "Dice:x"], "--draw must be STREAM:INDEX (e.g. shuffle:0), got 'Dice:x'"),
    ],
)
def test_verify_refuses_unreadable_expectations(
    proof_file: Path, options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(proof_file), *options]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"skillclassics verify: error: {message}\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not a valid fairness proof: proof is not valid JSON: Expecting property name"),
        ("[1, 2]", "is not a valid fairness proof: proof must be a JSON object, got an array"),
        (
            '{"format": "skillclassics-fairness-proof/9"}',
            "is not a valid fairness proof: unsupported proof format version "
            "'skillclassics-fairness-proof/9'",
        ),
    ],
)
def test_verify_a_malformed_file(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text)
    assert main(["verify", path]) == EXIT_ERROR == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"skillclassics verify: error: {path} {message}")
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_verify_a_malformed_field(tmp_path: Path, proof: Proof, capsys: pytest.CaptureFixture[str]) -> None:
    data = proof.to_dict()
    data["draws"][3]["count"] = "2"
    path = write(tmp_path, json.dumps(data))
    assert main(["verify", path]) == 2
    assert capsys.readouterr().err == (
        f"skillclassics verify: error: {path} is not a valid fairness proof: "
        "draws[3].count: expected an integer, got a string\n"
    )


def test_verify_an_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert main(["verify", str(missing)]) == 2
    assert (
        capsys.readouterr().err
        == f"skillclassics verify: error: cannot read {missing}: No such file or directory\n"
    )
    assert main(["verify", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x80\x81\x82")
    assert main(["verify", str(binary)]) == 2
    assert "is not a valid fairness proof: proof is not valid UTF-8 text" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
    assert main(["fly"]) == 2
    assert "invalid choice: 'fly'" in capsys.readouterr().err
    assert main(["verify"]) == 2
    assert "PROOF.json" in capsys.readouterr().err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "verify" in capsys.readouterr().out
    assert main(["verify", "--help"]) == 0
    assert "- to read standard input" in capsys.readouterr().out
    assert build_parser().prog == "skillclassics"


def test_proof_is_for_matches_with_chance(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proof", "go.0.abc"]) == EXIT_ERROR
    assert capsys.readouterr().err == (
        "skillclassics proof: error: go uses no chance: match go.0.abc has no fairness proof\n"
    )
    assert main(["proof", "--help"]) == EXIT_OK
    assert "(GetFairnessProof)" in capsys.readouterr().out


def test_python_dash_m_runs_the_cli(proof_file: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "clients.cli", "verify", str(proof_file)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "OK: commitment matches; 42 draws in 2 streams reproduced exactly\n",
        "",
    )
    bad = write(tmp_path, "{}")
    done = subprocess.run(
        [sys.executable, "-m", "clients.cli", "verify", "-"],
        cwd=REPO,
        input=Path(bad).read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "skillclassics verify: error: standard input is not a valid fairness proof: "
        "proof: missing key 'format'\n"
    )


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = [
        "login",
        "whoami",
        "ratings",
        "tables",
        "create",
        "join",
        "queue",
        "play",
        "watch",
        "record",
        "bot",
        "proof",
    ]
    for command in commands:
        assert main([command, "--help"]) == 0
        assert f"usage: skillclassics {command}" in capsys.readouterr().out
    assert main(["create", "--ruleset", "blitz"]) == 2  # argparse's own choices
    assert "invalid choice: 'blitz'" in capsys.readouterr().err


def test_create_and_queue_take_seed_002s_capped_bonus_clock_and_the_stand_in() -> None:
    """``--bonus-within``/``--cap`` give the backgammon lobby's capped-bonus clocks (002's quick and
    standard), which the table listing then shows; ``--stand-in`` asks for the stand-in policy."""
    quick = ["--minutes", "0.5", "--increment", "10", "--bonus-within", "10", "--cap", "30"]
    for command in ("create", "queue"):
        args = build_parser().parse_args([command, "--family", "backgammon", *quick, "--stand-in"])
        _, _, control = _table_setup(args)
        assert control == rules_pb2.TimeControl(
            base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=30_000
        )
        assert args.stand_in
        assert _clock(control) == "0.5+10 within 10s cap 30s"
    plain = build_parser().parse_args(["create", "--family", "backgammon", "--minutes", "5"])
    assert _table_setup(plain)[2] == rules_pb2.TimeControl(base_ms=300_000)
    assert _clock(_table_setup(plain)[2]) == "5+0"
    negative = build_parser().parse_args(["create", "--family", "backgammon", "--cap", "-1"])
    with pytest.raises(CommandError, match="cannot be negative"):
        _table_setup(negative)


def test_the_live_screen_keeps_a_ticking_clock_line_above_the_prompt() -> None:
    out = io.StringIO()
    screen = Screen(out, live=True)
    screen.status = "*White 5:00   Black 5:00"
    screen.show("board")
    assert out.getvalue() == "board\n*White 5:00   Black 5:00\n> "
    screen.tick("*White 4:59   Black 5:00")
    assert out.getvalue().endswith("\x1b7\x1b[1A\r\x1b[2K*White 4:59   Black 5:00\x1b8")
    screen.typed()  # Enter: the clock line is no longer right above the cursor
    before = out.getvalue()
    screen.tick("*White 4:58   Black 5:00")
    assert out.getvalue() == before
    screen.show("next")
    assert out.getvalue() == before + "next\n*White 4:58   Black 5:00\n> "
    plain = io.StringIO()
    quiet = Screen(plain, live=False)
    quiet.show("board")
    quiet.tick("clock")
    assert plain.getvalue() == "board\n"
