#!/bin/sh
# Print standard input in upper case.
tr "[:upper:]" "[:lower:]"
