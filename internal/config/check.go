package config

import "errors"

// CheckFile reads the TOML file at path over DefaultConfig, as latch serve
// does with --config, and validates the result. The environment and flags
// are not read: it checks the file alone. It returns every problem found,
// each naming its setting (by TOML key when the file cannot be decoded,
// by flag name when a value is invalid), or none when the file is good.
func CheckFile(path string) []error {
	cfg := DefaultConfig()
	if err := loadFile(&cfg, path); err != nil {
		return []error{err}
	}
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{errors.Unwrap(err)}
}
