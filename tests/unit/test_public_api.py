import delayline


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(delayline) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(delayline, name)).__name__ == "module"}
    assert set(delayline.__all__) | {"__version__"} >= public - modules
    assert all(hasattr(delayline, name) for name in delayline.__all__)


def test_every_error_is_a_delayline_error() -> None:
    for name in delayline.__all__:
        value = getattr(delayline, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, delayline.DelaylineError)
