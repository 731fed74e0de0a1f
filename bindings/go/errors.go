package fmha

/*
#include <fmha/fmha.h>
*/
import "C"

import "fmt"

// Status is an fmha_status code. Values are those of the header.
type Status int32

const (
	StatusSuccess Status = iota // consecutive, as in the header; abi_test.go checks each
	StatusInvalidArgument
	StatusNotSupported
	StatusVersionMismatch
	StatusNoDriver
	StatusNoDevice
	StatusDriverError
	StatusMisaligned
	StatusWorkspaceTooSmall
	StatusOutOfMemory
	StatusNoKernelImage
	StatusContextMismatch
	StatusInternalError
)

// String returns the library's name of s, e.g. "FMHA_STATUS_NOT_SUPPORTED"
// ("FMHA_STATUS_UNKNOWN" for values it does not know).
func (s Status) String() string {
	return C.GoString(C.fmha_status_string(C.fmha_status(s)))
}

// Error is a failed libfmha call: its status and the library's message,
// which names the field, the value and the rule broken.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return fmt.Sprintf("%s: %s", e.Status, e.Message)
}

// Is makes errors.Is(err, ErrNotSupported) (any sentinel below) true for
// every *Error of that status. A target with a message must match exactly.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Status == e.Status && (t.Message == "" || t.Message == e.Message)
}

// Sentinel errors, one per failing status, for errors.Is.
var (
	ErrInvalidArgument   = &Error{Status: StatusInvalidArgument}
	ErrNotSupported      = &Error{Status: StatusNotSupported}
	ErrVersionMismatch   = &Error{Status: StatusVersionMismatch}
	ErrNoDriver          = &Error{Status: StatusNoDriver}
	ErrNoDevice          = &Error{Status: StatusNoDevice}
	ErrDriverError       = &Error{Status: StatusDriverError}
	ErrMisaligned        = &Error{Status: StatusMisaligned}
	ErrWorkspaceTooSmall = &Error{Status: StatusWorkspaceTooSmall}
	ErrOutOfMemory       = &Error{Status: StatusOutOfMemory}
	ErrNoKernelImage     = &Error{Status: StatusNoKernelImage}
	ErrContextMismatch   = &Error{Status: StatusContextMismatch}
	ErrInternalError     = &Error{Status: StatusInternalError}
)

// statusError maps a raw status to nil or an *Error with the given message;
// used by tests to check the mapping of every status value.
func statusError(s Status, message string) error {
	if s == StatusSuccess {
		return nil
	}
	return &Error{Status: s, Message: message}
}
