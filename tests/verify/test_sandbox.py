"""Each run's working folder mirrors the user's: real folders, linked files."""

from __future__ import annotations

from migrator.verify.sandbox import mirror


def test_folders_are_real_and_files_are_links(tmp_path):
    user = tmp_path / "user"
    (user / "data" / "train").mkdir(parents=True)
    (user / "data" / "train" / "a.csv").write_text("1,2\n")
    (user / "config.yaml").write_text("lr: 0.1\n")
    (user / ".git").mkdir()
    run = tmp_path / "run"
    mirror(user, run)
    assert (run / "data" / "train").is_dir() and not (run / "data").is_symlink()
    assert (run / "data" / "train" / "a.csv").is_symlink()
    assert (run / "config.yaml").read_text() == "lr: 0.1\n"
    assert (run / ".git").is_symlink()  # linked whole


def test_a_folder_beyond_the_budget_is_linked_whole(tmp_path):
    user = tmp_path / "user"
    (user / "images").mkdir(parents=True)
    for index in range(20):
        (user / "images" / f"{index}.png").write_bytes(b"")
    (user / "train.py").write_text("")
    run = tmp_path / "run"
    mirror(user, run, max_entries=10)
    assert (run / "images").is_symlink() and len(list((run / "images").iterdir())) == 20
    assert (run / "train.py").is_symlink()


def test_a_work_folder_inside_the_user_folder_is_left_out(tmp_path):
    # TMPDIR under the program's own folder: verify's work folder lies inside what it mirrors
    user = tmp_path / "user"
    user.mkdir()
    (user / "train.py").write_text("")
    run = user / "migrate-verify-x" / "original-cwd"
    mirror(user, run)
    assert (run / "train.py").is_symlink()
    assert not (run / "migrate-verify-x").exists()
    assert sorted(p.name for p in run.iterdir()) == ["train.py"]
