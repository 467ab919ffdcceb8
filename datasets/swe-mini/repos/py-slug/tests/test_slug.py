from slug import slugify


def test_spaces():
    assert slugify("a  b c") == "a-b-c", slugify("a  b c")
