import sys

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


def test_a_declared_component_is_imported_only_when_it_is_got(tmp_path, monkeypatch):
    (tmp_path / "lazy_widgets.py").write_text('class Wide:\n    """Is wide."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_widgets", raising=False)
    registry = Registry("widget")
    registry.declare("wide", "lazy_widgets:Wide", summary="Is wide.", knobs=dict)
    assert registry.names() == ["wide"] and "wide" in registry
    assert registry.summary("wide") == "Is wide." and registry.declaration("wide").knobs is dict
    assert "lazy_widgets" not in sys.modules
    assert registry.get("wide").__name__ == "Wide"
    assert "lazy_widgets" in sys.modules


def test_declared_and_registered_names_share_one_namespace():
    registry = Registry("widget")
    registry.register("a")(object)
    with pytest.raises(ValueError, match="widget 'a' is registered twice"):
        registry.declare("a", "builtins:object", summary="")
    registry.declare("b", "builtins:object", summary="")
    with pytest.raises(ValueError, match="widget 'b' is registered twice"):
        registry.register("b")(object)
    with pytest.raises(UnknownComponent, match="unknown widget 'c'; valid: a, b"):
        registry.declaration("c")


def test_a_declaration_needs_a_module_and_attribute_path():
    with pytest.raises(ValueError, match="'builtins.object' is not a 'module:attribute' path"):
        Registry("widget").declare("a", "builtins.object", summary="")
