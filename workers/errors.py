"""Errors that are the user's to fix: the CLI prints them in one line and exits 2."""


class UserError(Exception):
    """Bad input: a config knob, a dataset file, a command-line argument.

    The message names what is wrong (the field, or the file and line) and is
    shown as it is, without a traceback.
    """


class ConfigError(UserError):
    """A RunConfig that does not validate, or an override that names no knob.

    `fields` maps each offending knob's dotted path ("rollout.group_size") to its
    message, so a form can show every error beside its field.
    """

    def __init__(self, message: str, fields: dict[str, str] | None = None):
        super().__init__(message)
        self.fields = fields or {}


class DatasetError(UserError):
    """A dataset file that is missing or malformed."""


class BundleError(UserError):
    """A bundle that is not one, goes over the import limits, has a malformed member, or was altered."""
