#!/usr/bin/env python
"""Django's command line for Rollout Lab's platform (see platform/rolloutlab/settings.py)."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    # platform/ is a plain folder holding the `rolloutlab` package (a package named
    # `platform` would shadow the standard library); an editable install puts it on the
    # path too, this line makes a bare checkout work.
    sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rolloutlab.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
