from calc import sub


def test_sub():
    assert sub(5, 3) == 2, sub(5, 3)
