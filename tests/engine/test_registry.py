import pytest

from workers.registry import Registry, UnknownComponent


def test_duplicate_names_are_rejected():
    registry = Registry("widget")
    registry.register("a")(object)
    with pytest.raises(ValueError, match="widget 'a' is registered twice"):
        registry.register("a")(object)


def test_unknown_name_lists_the_valid_ones():
    registry = Registry("widget")
    registry.register("b")(object)
    registry.register("a")(object)
    with pytest.raises(UnknownComponent, match="unknown widget 'c'; valid: a, b"):
        registry.get("c")


def test_summary_is_the_first_docstring_line():
    registry = Registry("widget")

    @registry.register("x")
    class X:
        """Does x.

        More text."""

    assert registry.summary("x") == "Does x."
