"""Checkpoints: what torch.save saved, flattened by the recorder, compared by the parent."""

from __future__ import annotations

from array import array

import pytest

from migrator.verify.checkpoints import Saved, SavedContents, compare_saved, read_saved

TOLERANCES = {"rtol": 1e-5, "atol": 1e-6}


def saved(path: str, tensors: dict[str, list[float]], **others) -> Saved:
    entries, values = [], array("d")
    for name, data in tensors.items():
        entries.append(
            {
                "name": name,
                "kind": "tensor",
                "shape": [len(data)],
                "dtype": "float32",
                "norm": sum(v * v for v in data) ** 0.5,
                "offset": len(values),
                "numel": len(data),
            }
        )
        values.extend(data)
    for name, value in others.items():
        kind = "number" if isinstance(value, (int, float)) else "class"
        entries.append({"name": name, "kind": kind, "value": value})
    return Saved(path, entries, values)


WEIGHTS = {"fc.weight": [0.5, -0.25], "fc.bias": [0.125]}


def test_the_same_keys_and_values_are_equal():
    assert compare_saved(saved("m.pt", WEIGHTS), saved("m.pt", WEIGHTS), **TOLERANCES) == []


def test_a_lost_module_prefix_is_named_and_the_values_still_compared():
    original = saved("m.pt", {f"module.{k}": v for k, v in WEIGHTS.items()})
    migrated = saved("m.pt", {**WEIGHTS, "fc.bias": [0.5]})
    problems = compare_saved(original, migrated, **TOLERANCES)
    assert "lost their `module.` prefix ('fc.bias', where the original saves " in problems[0]
    assert "'module.fc.bias' differs" in problems[1]


def test_an_added_module_prefix_is_named():
    migrated = saved("m.pt", {f"model/module.{k}": v for k, v in WEIGHTS.items()})
    original = saved("m.pt", {f"model/{k}": v for k, v in WEIGHTS.items()})
    [problem] = compare_saved(original, migrated, **TOLERANCES)
    assert "under 'model' gained a `module.` prefix" in problem


def test_other_key_differences_name_the_keys():
    [problem] = compare_saved(
        saved("m.pt", WEIGHTS), saved("m.pt", {"fc.weight": WEIGHTS["fc.weight"]}), **TOLERANCES
    )
    assert problem == "m.pt: the saved keys differ: only the original saves 'fc.bias'"


def test_numbers_and_saved_classes_are_compared():
    problems = compare_saved(
        saved("m.pt", WEIGHTS, epoch=1, best=0.75),
        saved("m.pt", WEIGHTS, epoch=1, best=1.5),
        **TOLERANCES,
    )
    assert problems == ["m.pt: 'best' is 1.5 in the migrated program, 0.75 in the original"]
    [whole] = compare_saved(
        saved("m.pt", {}, **{"": "Net"}),
        saved("m.pt", {}, **{"": "DistributedDataParallel"}),
        **TOLERANCES,
    )
    assert "saves a whole DistributedDataParallel, where the original saves a Net" in whole


def test_rounding_in_a_few_elements_stays_within_the_tensors_size():
    near = {"w": [1.0, 2.0, 3.0, 1e-9]}
    off = {"w": [1.0, 2.0, 3.0, 2e-5]}  # elementwise out of tolerance, 5e-6 of the tensor
    assert compare_saved(saved("m.pt", near), saved("m.pt", off), **TOLERANCES) == []
    wrong = {"w": [1.0, 2.0, 3.5, 0.0]}
    assert (
        "differs: max |Δ| 0.5"
        in compare_saved(saved("m.pt", near), saved("m.pt", wrong), **TOLERANCES)[0]
    )


def test_the_recorder_keeps_the_last_save_to_each_path(tmp_path):
    torch = pytest.importorskip("torch")
    contents = SavedContents(tmp_path, rank=0)
    model = torch.nn.Linear(2, 1)
    contents.take({"epoch": 0, "model": model.state_dict()}, "ckpt.pt")
    contents.take({"epoch": 1, "model": model.state_dict(), "note": "last"}, "ckpt.pt")
    contents.take(model, "whole.pt")
    found = read_saved(tmp_path, 0)
    assert sorted(found) == ["ckpt.pt", "whole.pt"]
    names = {entry["name"]: entry for entry in found["ckpt.pt"].entries}
    assert names["epoch"]["value"] == 1 and names["note"]["value"] == "last"
    assert names["model/weight"]["shape"] == [1, 2]
    weight = names["model/weight"]
    stored = found["ckpt.pt"].values[weight["offset"] : weight["offset"] + weight["numel"]]
    assert list(stored) == pytest.approx(model.weight.detach().flatten().tolist())
    assert found["whole.pt"].entries[0] == {"name": "", "kind": "class", "value": "Linear"}
