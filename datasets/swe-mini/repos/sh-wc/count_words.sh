#!/bin/sh
# Print the number of words read from standard input.
wc -c | tr -d " "
