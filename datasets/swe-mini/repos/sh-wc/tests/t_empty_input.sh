[ "$(printf "" | sh count_words.sh)" = 0 ]
