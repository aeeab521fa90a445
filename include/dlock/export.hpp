// dlock/export.hpp: DLOCK_EXPORT marks what the libraries export. They are
// built with hidden visibility, so a shared libdlock exports the public API
// and nothing else: its internals can change without breaking a program's
// link, and cannot clash with a program's own symbols.
#ifndef DLOCK_EXPORT_HPP_
#define DLOCK_EXPORT_HPP_

#if defined(__GNUC__) || defined(__clang__)
#define DLOCK_EXPORT [[gnu::visibility("default")]]
#else
#define DLOCK_EXPORT
#endif

#endif  // DLOCK_EXPORT_HPP_
