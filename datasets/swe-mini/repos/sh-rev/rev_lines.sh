#!/bin/sh
# Print the lines of standard input last first.
cat
