"""The rules-shard directory file as Kubernetes delivers it: a ConfigMap mounted as a directory
(deploy/k8s/base/rules-shards.yaml), which the kubelet updates by swapping a ``..data`` symlink, never by
writing the file in place (libs/match/routing.py, ``ShardDirectory``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from libs.match.routing import ShardDirectory

KEY = "rules-shards.env"
CHESS_0 = "rules-chess-0.rules-chess-headless:50060"
CHESS_1 = "rules-chess-1.rules-chess-headless:50060"
CHESS_2 = "rules-chess-2.rules-chess-headless:50060"
GIN_0 = "rules-gin-0.rules-gin-headless:50062"


def kubelet_publish(volume: Path, files: dict[str, str], stamp: str) -> None:
    """Publish ``files`` into a ConfigMap volume the way the kubelet's AtomicWriter does
    (pkg/volume/util/atomic_writer.go): write them into a new hidden timestamped directory, point a new
    ``..data_tmp`` symlink at it and rename that over ``..data`` (one atomic step), create the
    user-visible ``<key> -> ..data/<key>`` symlinks that do not exist yet, then remove the old directory."""
    payload = volume / f"..{stamp}"
    payload.mkdir()
    for name, text in files.items():
        (payload / name).write_text(text, encoding="utf-8")
    data = volume / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    swap = volume / "..data_tmp"
    swap.symlink_to(payload.name)
    os.rename(swap, data)
    for name in files:
        link = volume / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    if old is not None:
        shutil.rmtree(volume / old)


def test_a_configmap_swap_of_the_data_symlink_is_seen(tmp_path: Path) -> None:
    volume = tmp_path / "rules-shards"
    volume.mkdir()
    kubelet_publish(
        volume,
        {KEY: f"RULES_CHESS_ADDRESSES={CHESS_0},{CHESS_1}\nRULES_GIN_ADDRESSES={GIN_0}\n"},
        "2026_12_02_15_00_00.000000001",
    )
    path = volume / KEY
    assert path.is_symlink()
    assert os.readlink(path) == f"..data/{KEY}"
    directory = ShardDirectory({"RULES_SHARDS_FILE": str(path)})
    assert directory == {"chess": [CHESS_0, CHESS_1], "gin": [GIN_0]}
    assert not directory.refresh()  # nothing swapped yet

    # An operator appends rules-chess-2 to the ConfigMap; the kubelet swaps ..data to a new directory
    # (and deletes the old one). The path the service watches is the same symlink, whose target is new.
    kubelet_publish(
        volume,
        {KEY: f"RULES_CHESS_ADDRESSES={CHESS_0},{CHESS_1},{CHESS_2}\nRULES_GIN_ADDRESSES={GIN_0}\n"},
        "2026_12_02_15_01_00.000000002",
    )
    assert sorted(p.name for p in volume.iterdir()) == ["..2026_12_02_15_01_00.000000002", "..data", KEY]
    assert directory.refresh()
    assert directory["chess"] == [CHESS_0, CHESS_1, CHESS_2]
    assert directory["gin"] == [GIN_0]
    assert not directory.refresh()

    # A later swap that would drop a shard is refused, like any shorter list: the ids still name it.
    kubelet_publish(volume, {KEY: f"RULES_CHESS_ADDRESSES={CHESS_0}\n"}, "2026_12_02_15_02_00.000000003")
    assert not directory.refresh()
    assert directory["chess"] == [CHESS_0, CHESS_1, CHESS_2]


def test_a_family_the_configmap_does_not_list_keeps_its_variable(tmp_path: Path) -> None:
    volume = tmp_path / "rules-shards"
    volume.mkdir()
    kubelet_publish(volume, {KEY: f"RULES_GIN_ADDRESSES={GIN_0}\n"}, "2026_12_02_15_00_00.000000001")
    env = {"RULES_SHARDS_FILE": str(volume / KEY), "RULES_CHESS_ADDRESSES": f"{CHESS_0},{CHESS_1}"}
    directory = ShardDirectory(env)
    assert directory == {"chess": [CHESS_0, CHESS_1], "gin": [GIN_0]}
