"""``harness-gym serve`` without the ``openenv`` extra: one line naming the extra, no traceback."""

from __future__ import annotations

import importlib.util
import io

import pytest

from harness_gym.cli import CLIExit, main


@pytest.mark.skipif(importlib.util.find_spec("openenv") is not None, reason="openenv is installed")
def test_serve_without_openenv_names_the_extra(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(CLIExit) as err:
        main(["serve", "--task", "ClickButton"], out=io.StringIO())
    assert err.value.code == 2 and "harness-gym[openenv]" in str(err.value)
    assert "Traceback" not in capsys.readouterr().err
