#!/bin/sh
# Exit 0 when hello.sh prints exactly "hello, world".
[ -f hello.sh ] && [ "$(sh hello.sh)" = "hello, world" ]
