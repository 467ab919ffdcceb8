[ "$(echo 123 | sh upper.sh)" = 123 ]
