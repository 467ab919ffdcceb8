from fizz import fizzbuzz


def test_three():
    assert fizzbuzz(3) == "Fizz"
    assert fizzbuzz(5) == "Buzz"
