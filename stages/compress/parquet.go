package compress

import "errors"

// openParquet is replaced below once Parquet input is wired.
func openParquet(path string) (lineReader, error) {
	return nil, errors.New("parquet input is not supported yet")
}
