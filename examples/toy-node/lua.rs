//! A small subset of Lua 5.1 for the toy node's EVAL, FCALL and FUNCTION LOAD: enough for
//! the scripts clients and Redis's own test suites send (`redis.call(...)` with `KEYS` and
//! `ARGV`, `return`, locals, `if`, numeric `for`, `while`, tables, function literals,
//! `redis.register_function`), not the whole language: no metatables, no coroutines, no
//! string library, no varargs, one value per return. A script outside the subset gets an
//! error naming what it used, never a wrong answer.
//!
//! Hostile scripts are bounded: source nesting (parser depth), call depth and the number of
//! steps a script may run are all capped, and tables only grow as far as the step budget.

use std::cell::RefCell;
use std::rc::Rc;

/// Nesting deeper than this in the source is refused.
const MAX_DEPTH: usize = 200;
/// Nested blocks, expressions and calls a run may be inside at once (the interpreter
/// recurses on the native stack: this bounds how deep), past which it fails with "stack
/// overflow" rather than overflow the thread's stack.
const MAX_NESTING: usize = 200;
/// Statements and expressions a script may evaluate.
const MAX_STEPS: u64 = 10_000_000;
/// Bytes a script's concatenations may make in all (strings doubling in a loop reach any
/// size in a few steps).
const MAX_CONCAT_BYTES: usize = 256 << 20;

/// A Lua value.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Nil,
    Bool(bool),
    Num(f64),
    Str(Rc<Vec<u8>>),
    Table(Rc<RefCell<Table>>),
    Func(Rc<Closure>),
    Builtin(Builtin),
}

/// The functions the host gives a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Call,
    Pcall,
    StatusReply,
    ErrorReply,
    RegisterFunction,
    Log,
    SetResp,
    ToNumber,
    ToString,
    Type,
    Error,
    Unpack,
}

/// A table: its array part (keys 1..n) and its other keys.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub(crate) array: Vec<Value>,
    pub(crate) fields: Vec<(Key, Value)>,
}

/// A table key other than a value of the array part.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Key {
    Str(Vec<u8>),
    Int(i64),
    Bool(bool),
}

impl Table {
    pub(crate) fn get(&self, key: &Key) -> Value {
        if let Key::Int(i) = key {
            if *i >= 1 && (*i as usize) <= self.array.len() {
                return self.array[*i as usize - 1].clone();
            }
        }
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map_or(Value::Nil, |(_, v)| v.clone())
    }

    pub(crate) fn field(&self, name: &str) -> Value {
        self.get(&Key::Str(name.as_bytes().to_vec()))
    }

    fn set(&mut self, key: Key, value: Value) {
        if let Key::Int(i) = key {
            let len = self.array.len();
            if i >= 1 && (i as usize) <= len {
                self.array[i as usize - 1] = value;
                // A nil at the end shortens the array part.
                while matches!(self.array.last(), Some(Value::Nil)) {
                    self.array.pop();
                }
                return;
            }
            if i as usize == len + 1 && !matches!(value, Value::Nil) {
                self.array.push(value);
                // Keys that now follow the array part move into it.
                loop {
                    let next = Key::Int(self.array.len() as i64 + 1);
                    let Some(at) = self.fields.iter().position(|(k, _)| *k == next) else {
                        break;
                    };
                    let (_, v) = self.fields.remove(at);
                    self.array.push(v);
                }
                return;
            }
        }
        self.fields.retain(|(k, _)| *k != key);
        if !matches!(value, Value::Nil) {
            self.fields.push((key, value));
        }
    }
}

/// A function literal with the scope it was made in.
#[derive(Debug)]
pub(crate) struct Closure {
    def: Rc<FuncDef>,
    scope: Rc<Scope>,
}

#[derive(Debug)]
struct FuncDef {
    params: Vec<String>,
    body: Block,
}

/// Local variables of one block, and the enclosing block's.
#[derive(Debug, Default)]
struct Scope {
    vars: RefCell<Vec<(String, Value)>>,
    parent: Option<Rc<Self>>,
}

impl Scope {
    fn child(parent: &Rc<Self>) -> Rc<Self> {
        Rc::new(Self {
            vars: RefCell::new(Vec::new()),
            parent: Some(parent.clone()),
        })
    }

    fn lookup(&self, name: &str) -> Option<Value> {
        let found = self
            .vars
            .borrow()
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone());
        found.or_else(|| self.parent.as_ref()?.lookup(name))
    }

    fn assign(&self, name: &str, value: &Value) -> bool {
        if let Some(slot) = self
            .vars
            .borrow_mut()
            .iter_mut()
            .rev()
            .find(|(n, _)| n == name)
        {
            slot.1 = value.clone();
            return true;
        }
        self.parent
            .as_ref()
            .is_some_and(|parent| parent.assign(name, value))
    }

    fn declare(&self, name: &str, value: Value) {
        self.vars.borrow_mut().push((name.to_string(), value));
    }
}

/// Statements, each with the line it starts on.
type Block = Vec<(usize, Stat)>;

#[derive(Debug)]
enum Stat {
    Local(Vec<String>, Vec<Expr>),
    Assign(Vec<Expr>, Vec<Expr>),
    Call(Expr),
    Return(Option<Expr>),
    If(Vec<(Expr, Block)>, Option<Block>),
    For(String, Expr, Expr, Option<Expr>, Block),
    While(Expr, Block),
    Do(Block),
    Break,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Or,
    And,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Concat,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

#[derive(Debug)]
enum Expr {
    Nil,
    Bool(bool),
    Num(f64),
    Str(Vec<u8>),
    Func(Rc<FuncDef>),
    Table(Vec<(Option<Self>, Self)>),
    Name(String),
    Index(Box<Self>, Box<Self>),
    Call(Box<Self>, Vec<Self>),
    Bin(Op, Box<Self>, Box<Self>),
    Not(Box<Self>),
    Neg(Box<Self>),
    Len(Box<Self>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Num(f64),
    Str(Vec<u8>),
    Sym(&'static str),
    Eof,
}

const SYMBOLS: &[&str] = &[
    "...", "..", "==", "~=", "<=", ">=", "+", "-", "*", "/", "%", "^", "#", "<", ">", "=", "(",
    ")", "{", "}", "[", "]", ";", ":", ",", ".",
];

const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in", "local",
    "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// A script error: the message the client is told.
pub(crate) type Error = String;

fn tokenize(source: &[u8]) -> Result<Vec<(Token, usize)>, Error> {
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    // A first line that starts with '#' (a shebang) is skipped, as Lua does.
    if source.first() == Some(&b'#') {
        while i < source.len() && source[i] != b'\n' {
            i += 1;
        }
    }
    while i < source.len() {
        let c = source[i];
        if c == b'\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if source[i..].starts_with(b"--") {
            i += 2;
            if let Some(len) = long_bracket(&source[i..]) {
                let end = find_close(&source[i..], len).ok_or("unfinished long comment")?;
                line += source[i..i + end].iter().filter(|&&b| b == b'\n').count();
                i += end;
            } else {
                while i < source.len() && source[i] != b'\n' {
                    i += 1;
                }
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < source.len() && (source[i].is_ascii_alphanumeric() || source[i] == b'_') {
                i += 1;
            }
            let word = String::from_utf8_lossy(&source[start..i]).into_owned();
            tokens.push((Token::Name(word), line));
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && source.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            if source[i..].starts_with(b"0x") || source[i..].starts_with(b"0X") {
                i += 2;
                while i < source.len() && source[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let text = std::str::from_utf8(&source[start + 2..i]).map_err(|_| "bad number")?;
                let n = i64::from_str_radix(text, 16).map_err(|_| "malformed number")?;
                tokens.push((Token::Num(n as f64), line));
                continue;
            }
            while i < source.len()
                && (source[i].is_ascii_alphanumeric()
                    || source[i] == b'.'
                    || ((source[i] == b'-' || source[i] == b'+')
                        && matches!(source[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let text = std::str::from_utf8(&source[start..i]).map_err(|_| "bad number")?;
            let n: f64 = text
                .parse()
                .map_err(|_| format!("malformed number near '{text}'"))?;
            tokens.push((Token::Num(n), line));
            continue;
        }
        if c == b'"' || c == b'\'' {
            let (text, used) = quoted(&source[i..])?;
            line += source[i..i + used].iter().filter(|&&b| b == b'\n').count();
            tokens.push((Token::Str(text), line));
            i += used;
            continue;
        }
        if c == b'[' {
            if let Some(len) = long_bracket(&source[i..]) {
                let end = find_close(&source[i..], len).ok_or("unfinished long string")?;
                let mut body = &source[i + len..i + end - len];
                if body.first() == Some(&b'\n') {
                    body = &body[1..];
                }
                line += source[i..i + end].iter().filter(|&&b| b == b'\n').count();
                tokens.push((Token::Str(body.to_vec()), line));
                i += end;
                continue;
            }
        }
        match SYMBOLS
            .iter()
            .find(|s| source[i..].starts_with(s.as_bytes()))
        {
            Some(sym) => {
                tokens.push((Token::Sym(sym), line));
                i += sym.len();
            }
            None => return Err(format!("unexpected symbol near '{}'", char::from(c))),
        }
    }
    tokens.push((Token::Eof, line));
    Ok(tokens)
}

/// `[[` or `[==[`: the opening's length.
fn long_bracket(s: &[u8]) -> Option<usize> {
    if s.first() != Some(&b'[') {
        return None;
    }
    let eqs = s[1..].iter().take_while(|&&b| b == b'=').count();
    (s.get(1 + eqs) == Some(&b'[')).then_some(eqs + 2)
}

/// Where the long bracket opened with `len` bytes closes (the index after it).
fn find_close(s: &[u8], len: usize) -> Option<usize> {
    let mut close = vec![b']'];
    close.extend(std::iter::repeat_n(b'=', len - 2));
    close.push(b']');
    let at = s[len..].windows(close.len()).position(|w| w == close)?;
    Some(len + at + close.len())
}

/// A quoted string with its escapes, and the bytes it took.
fn quoted(s: &[u8]) -> Result<(Vec<u8>, usize), Error> {
    let quote = s[0];
    let mut out = Vec::new();
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            c if c == quote => return Ok((out, i + 1)),
            b'\n' => break,
            b'\\' if i + 1 < s.len() => {
                i += 1;
                match s[i] {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'v' => out.push(11),
                    b'\n' => out.push(b'\n'),
                    d if d.is_ascii_digit() => {
                        let digits = s[i..].iter().take(3).take_while(|b| b.is_ascii_digit());
                        let n = digits.count();
                        let text = std::str::from_utf8(&s[i..i + n]).unwrap_or("0");
                        let value: u32 = text.parse().unwrap_or(256);
                        out.push(u8::try_from(value).map_err(|_| "escape sequence too large")?);
                        i += n - 1;
                    }
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    Err("unfinished string".into())
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    depth: usize,
    /// `user_script` or `user_function`, for error messages.
    chunk: &'static str,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at.min(self.tokens.len() - 1)].0
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.at += 1;
        token
    }

    fn is_sym(&self, sym: &str) -> bool {
        matches!(self.peek(), Token::Sym(s) if *s == sym)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Token::Name(n) if n == word)
    }

    fn line(&self) -> usize {
        self.tokens[self.at.min(self.tokens.len() - 1)].1
    }

    fn error<T>(&self, what: &str) -> Result<T, Error> {
        let near = match self.peek() {
            Token::Eof => "<eof>".to_string(),
            Token::Name(n) => n.clone(),
            Token::Num(n) => number_text(*n),
            Token::Str(s) => String::from_utf8_lossy(s).into_owned(),
            Token::Sym(s) => (*s).to_string(),
        };
        Err(format!(
            "{}:{}: {what} near '{near}'",
            self.chunk,
            self.line()
        ))
    }

    fn expect_sym(&mut self, sym: &str) -> Result<(), Error> {
        if self.is_sym(sym) {
            self.at += 1;
            Ok(())
        } else {
            self.error(&format!("'{sym}' expected"))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<(), Error> {
        if self.is_word(word) {
            self.at += 1;
            Ok(())
        } else {
            self.error(&format!("'{word}' expected"))
        }
    }

    fn name(&mut self) -> Result<String, Error> {
        match self.next() {
            Token::Name(n) if !KEYWORDS.contains(&n.as_str()) => Ok(n),
            _ => {
                self.at -= 1;
                self.error("<name> expected")
            }
        }
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error("chunk has too many syntax levels");
        }
        Ok(())
    }

    fn block(&mut self) -> Result<Block, Error> {
        self.enter()?;
        let mut block = Vec::new();
        loop {
            while self.is_sym(";") {
                self.at += 1;
            }
            let end = matches!(self.peek(), Token::Eof)
                || ["end", "else", "elseif", "until"]
                    .iter()
                    .any(|w| self.is_word(w));
            if end {
                break;
            }
            let line = self.line();
            let stat = self.statement()?;
            let last = matches!(stat, Stat::Return(_) | Stat::Break);
            block.push((line, stat));
            if last {
                while self.is_sym(";") {
                    self.at += 1;
                }
                break;
            }
        }
        self.depth -= 1;
        Ok(block)
    }

    fn statement(&mut self) -> Result<Stat, Error> {
        if self.is_word("return") {
            self.at += 1;
            let ends = matches!(self.peek(), Token::Eof)
                || self.is_sym(";")
                || ["end", "else", "elseif", "until"]
                    .iter()
                    .any(|w| self.is_word(w));
            if ends {
                return Ok(Stat::Return(None));
            }
            let value = self.expr(0)?;
            if self.is_sym(",") {
                return self.error("the toy's Lua returns one value");
            }
            return Ok(Stat::Return(Some(value)));
        }
        if self.is_word("break") {
            self.at += 1;
            return Ok(Stat::Break);
        }
        if self.is_word("local") {
            self.at += 1;
            if self.is_word("function") {
                self.at += 1;
                let name = self.name()?;
                let def = self.body()?;
                return Ok(Stat::Local(vec![name], vec![Expr::Func(def)]));
            }
            let mut names = vec![self.name()?];
            while self.is_sym(",") {
                self.at += 1;
                names.push(self.name()?);
            }
            let mut values = Vec::new();
            if self.is_sym("=") {
                self.at += 1;
                values = self.exprs()?;
            }
            return Ok(Stat::Local(names, values));
        }
        if self.is_word("function") {
            self.at += 1;
            let mut target = Expr::Name(self.name()?);
            while self.is_sym(".") {
                self.at += 1;
                let field = self.name()?;
                target = Expr::Index(Box::new(target), Box::new(Expr::Str(field.into_bytes())));
            }
            let def = self.body()?;
            return Ok(Stat::Assign(vec![target], vec![Expr::Func(def)]));
        }
        if self.is_word("if") {
            self.at += 1;
            let mut arms = Vec::new();
            let cond = self.expr(0)?;
            self.expect_word("then")?;
            arms.push((cond, self.block()?));
            let mut otherwise = None;
            loop {
                if self.is_word("elseif") {
                    self.at += 1;
                    let cond = self.expr(0)?;
                    self.expect_word("then")?;
                    arms.push((cond, self.block()?));
                } else if self.is_word("else") {
                    self.at += 1;
                    otherwise = Some(self.block()?);
                    self.expect_word("end")?;
                    break;
                } else {
                    self.expect_word("end")?;
                    break;
                }
            }
            return Ok(Stat::If(arms, otherwise));
        }
        if self.is_word("while") {
            self.at += 1;
            let cond = self.expr(0)?;
            self.expect_word("do")?;
            let body = self.block()?;
            self.expect_word("end")?;
            return Ok(Stat::While(cond, body));
        }
        if self.is_word("do") {
            self.at += 1;
            let body = self.block()?;
            self.expect_word("end")?;
            return Ok(Stat::Do(body));
        }
        if self.is_word("for") {
            self.at += 1;
            let var = self.name()?;
            if !self.is_sym("=") {
                return self.error("the toy's Lua has numeric for loops only");
            }
            self.at += 1;
            let start = self.expr(0)?;
            self.expect_sym(",")?;
            let stop = self.expr(0)?;
            let step = if self.is_sym(",") {
                self.at += 1;
                Some(self.expr(0)?)
            } else {
                None
            };
            self.expect_word("do")?;
            let body = self.block()?;
            self.expect_word("end")?;
            return Ok(Stat::For(var, start, stop, step, body));
        }
        if self.is_word("repeat") {
            return self.error("the toy's Lua has no repeat loops");
        }
        // An assignment or a call.
        let first = self.suffixed()?;
        if self.is_sym("=") || self.is_sym(",") {
            let mut targets = vec![first];
            while self.is_sym(",") {
                self.at += 1;
                targets.push(self.suffixed()?);
            }
            self.expect_sym("=")?;
            if targets
                .iter()
                .any(|t| !matches!(t, Expr::Name(_) | Expr::Index(..)))
            {
                return self.error("syntax error near '='");
            }
            let values = self.exprs()?;
            return Ok(Stat::Assign(targets, values));
        }
        match first {
            Expr::Call(..) => Ok(Stat::Call(first)),
            _ => self.error("'=' expected"),
        }
    }

    fn exprs(&mut self) -> Result<Vec<Expr>, Error> {
        let mut values = vec![self.expr(0)?];
        while self.is_sym(",") {
            self.at += 1;
            values.push(self.expr(0)?);
        }
        Ok(values)
    }

    fn body(&mut self) -> Result<Rc<FuncDef>, Error> {
        self.expect_sym("(")?;
        let mut params = Vec::new();
        if !self.is_sym(")") {
            loop {
                if self.is_sym("...") {
                    return self.error("the toy's Lua has no varargs");
                }
                params.push(self.name()?);
                if !self.is_sym(",") {
                    break;
                }
                self.at += 1;
            }
        }
        self.expect_sym(")")?;
        let body = self.block()?;
        self.expect_word("end")?;
        Ok(Rc::new(FuncDef { params, body }))
    }

    fn binary(&self) -> Option<(Op, u8, u8)> {
        // (operator, left priority, right priority), as Lua 5.1's parser ranks them.
        let op = match self.peek() {
            Token::Name(n) if n == "or" => (Op::Or, 1, 1),
            Token::Name(n) if n == "and" => (Op::And, 2, 2),
            Token::Sym("<") => (Op::Lt, 3, 3),
            Token::Sym("<=") => (Op::Le, 3, 3),
            Token::Sym(">") => (Op::Gt, 3, 3),
            Token::Sym(">=") => (Op::Ge, 3, 3),
            Token::Sym("==") => (Op::Eq, 3, 3),
            Token::Sym("~=") => (Op::Ne, 3, 3),
            Token::Sym("..") => (Op::Concat, 5, 4),
            Token::Sym("+") => (Op::Add, 6, 6),
            Token::Sym("-") => (Op::Sub, 6, 6),
            Token::Sym("*") => (Op::Mul, 7, 7),
            Token::Sym("/") => (Op::Div, 7, 7),
            Token::Sym("%") => (Op::Mod, 7, 7),
            Token::Sym("^") => (Op::Pow, 10, 9),
            _ => return None,
        };
        Some(op)
    }

    fn expr(&mut self, limit: u8) -> Result<Expr, Error> {
        self.enter()?;
        let mut left = if self.is_word("not") {
            self.at += 1;
            Expr::Not(Box::new(self.expr(8)?))
        } else if self.is_sym("-") {
            self.at += 1;
            Expr::Neg(Box::new(self.expr(8)?))
        } else if self.is_sym("#") {
            self.at += 1;
            Expr::Len(Box::new(self.expr(8)?))
        } else {
            self.simple()?
        };
        while let Some((op, lp, rp)) = self.binary() {
            if lp <= limit {
                break;
            }
            self.at += 1;
            let right = self.expr(rp)?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn simple(&mut self) -> Result<Expr, Error> {
        match self.peek().clone() {
            Token::Num(n) => {
                self.at += 1;
                Ok(Expr::Num(n))
            }
            Token::Str(s) => {
                self.at += 1;
                Ok(Expr::Str(s))
            }
            Token::Name(n) if n == "nil" => {
                self.at += 1;
                Ok(Expr::Nil)
            }
            Token::Name(n) if n == "true" || n == "false" => {
                self.at += 1;
                Ok(Expr::Bool(n == "true"))
            }
            Token::Name(n) if n == "function" => {
                self.at += 1;
                Ok(Expr::Func(self.body()?))
            }
            Token::Sym("{") => self.table(),
            Token::Sym("...") => self.error("the toy's Lua has no varargs"),
            _ => self.suffixed(),
        }
    }

    fn table(&mut self) -> Result<Expr, Error> {
        self.expect_sym("{")?;
        let mut items = Vec::new();
        while !self.is_sym("}") {
            if self.is_sym("[") {
                self.at += 1;
                let key = self.expr(0)?;
                self.expect_sym("]")?;
                self.expect_sym("=")?;
                items.push((Some(key), self.expr(0)?));
            } else if matches!(self.peek(), Token::Name(_))
                && matches!(self.tokens.get(self.at + 1), Some((Token::Sym("="), _)))
            {
                let name = self.name()?;
                self.at += 1;
                items.push((Some(Expr::Str(name.into_bytes())), self.expr(0)?));
            } else {
                items.push((None, self.expr(0)?));
            }
            if self.is_sym(",") || self.is_sym(";") {
                self.at += 1;
            } else {
                break;
            }
        }
        self.expect_sym("}")?;
        Ok(Expr::Table(items))
    }

    fn suffixed(&mut self) -> Result<Expr, Error> {
        self.enter()?;
        let mut expr = if self.is_sym("(") {
            self.at += 1;
            let inner = self.expr(0)?;
            self.expect_sym(")")?;
            inner
        } else if matches!(self.peek(), Token::Name(n) if !KEYWORDS.contains(&n.as_str())) {
            Expr::Name(self.name()?)
        } else {
            return self.error("unexpected symbol");
        };
        loop {
            if self.is_sym(".") {
                self.at += 1;
                let field = self.name()?;
                expr = Expr::Index(Box::new(expr), Box::new(Expr::Str(field.into_bytes())));
            } else if self.is_sym("[") {
                self.at += 1;
                let key = self.expr(0)?;
                self.expect_sym("]")?;
                expr = Expr::Index(Box::new(expr), Box::new(key));
            } else if self.is_sym(":") {
                return self.error("the toy's Lua has no methods");
            } else if self.is_sym("(") || self.is_sym("{") || matches!(self.peek(), Token::Str(_)) {
                let args = self.args()?;
                expr = Expr::Call(Box::new(expr), args);
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(expr)
    }

    fn args(&mut self) -> Result<Vec<Expr>, Error> {
        match self.peek().clone() {
            Token::Str(s) => {
                self.at += 1;
                Ok(vec![Expr::Str(s)])
            }
            Token::Sym("{") => Ok(vec![self.table()?]),
            _ => {
                self.expect_sym("(")?;
                if self.is_sym(")") {
                    self.at += 1;
                    return Ok(Vec::new());
                }
                let args = self.exprs()?;
                self.expect_sym(")")?;
                Ok(args)
            }
        }
    }
}

/// A parsed script, ready to run.
#[derive(Debug)]
pub(crate) struct Chunk(Rc<FuncDef>);

/// Parses a script (its shebang line, if any, skipped); `chunk` names it in errors
/// (`user_script`, `user_function`).
pub(crate) fn parse(source: &[u8], chunk: &'static str) -> Result<Chunk, Error> {
    let tokens = tokenize(source).map_err(|e| format!("{chunk}: {e}"))?;
    let mut parser = Parser {
        tokens,
        at: 0,
        depth: 0,
        chunk,
    };
    let body = parser.block()?;
    if !matches!(parser.peek(), Token::Eof) {
        return parser.error("'<eof>' expected");
    }
    Ok(Chunk(Rc::new(FuncDef {
        params: Vec::new(),
        body,
    })))
}

/// What a script reaches outside itself: `redis.call` and friends.
pub(crate) trait Host {
    /// Runs a command; `Err` is the error reply's text (raised by `redis.call`, returned as
    /// `{err=…}` by `redis.pcall`).
    fn call(&mut self, args: &[Vec<u8>]) -> Result<Value, Vec<u8>>;
    /// `redis.register_function` while a library loads.
    fn register(
        &mut self,
        name: Vec<u8>,
        function: Value,
        flags: Vec<Vec<u8>>,
    ) -> Result<(), Error>;
    /// `redis.log`.
    fn log(&mut self, text: &str);
}

/// How a block ended.
enum Flow {
    Normal,
    Break,
    Return(Value),
}

/// A script's run: its globals and its budget.
pub(crate) struct Interp<'h> {
    host: &'h mut dyn Host,
    globals: Rc<Scope>,
    steps: u64,
    /// How deep the run is (see [`MAX_NESTING`]).
    calls: usize,
    /// The line of the statement running (after an error: where it happened).
    line: usize,
    /// Bytes made by concatenation so far (see [`MAX_CONCAT_BYTES`]).
    concatenated: usize,
    /// The error came from a command (`redis.call`), not from the script's own code.
    raised: bool,
}

fn string(text: &[u8]) -> Value {
    Value::Str(Rc::new(text.to_vec()))
}

/// A table of strings (`KEYS`, `ARGV`).
pub(crate) fn list(items: &[&[u8]]) -> Value {
    let table = Table {
        array: items.iter().map(|item| string(item)).collect(),
        fields: Vec::new(),
    };
    Value::Table(Rc::new(RefCell::new(table)))
}

/// A table of `name = value` fields (`{ok = "OK"}`, `{err = "…"}`).
pub(crate) fn record(name: &str, value: Value) -> Value {
    let mut table = Table::default();
    table.set(Key::Str(name.as_bytes().to_vec()), value);
    Value::Table(Rc::new(RefCell::new(table)))
}

/// A table of values.
pub(crate) fn array(items: Vec<Value>) -> Value {
    let mut table = Table::default();
    for (n, item) in items.into_iter().enumerate() {
        table.set(Key::Int(n as i64 + 1), item);
    }
    Value::Table(Rc::new(RefCell::new(table)))
}

/// `nil` and `false` are false; everything else is true.
fn truthy(value: &Value) -> bool {
    !matches!(value, Value::Nil | Value::Bool(false))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Bool(_) => "boolean",
        Value::Num(_) => "number",
        Value::Str(_) => "string",
        Value::Table(_) => "table",
        Value::Func(_) | Value::Builtin(_) => "function",
    }
}

/// A number's text as Lua 5.1 prints it (C's `%.14g`).
pub(crate) fn number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // 14 significant digits; the exponent picks fixed or scientific form, as %g does.
    let scientific = format!("{n:.13e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..14).contains(&exponent) {
        let decimals = usize::try_from(13 - exponent).unwrap_or(0);
        trim(&format!("{n:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    }
}

fn to_number(value: &Value) -> Option<f64> {
    match value {
        Value::Num(n) => Some(*n),
        Value::Str(s) => std::str::from_utf8(s).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn key_of(value: &Value) -> Result<Key, Error> {
    match value {
        Value::Str(s) => Ok(Key::Str(s.to_vec())),
        Value::Num(n) if n.fract() == 0.0 => Ok(Key::Int(*n as i64)),
        Value::Bool(b) => Ok(Key::Bool(*b)),
        Value::Nil => Err("table index is nil".into()),
        other => Err(format!(
            "the toy's Lua cannot index a table by a {}",
            type_name(other)
        )),
    }
}

impl<'h> Interp<'h> {
    /// A run with `KEYS`, `ARGV` and the `redis` table as globals.
    pub(crate) fn new(host: &'h mut dyn Host, keys: &[&[u8]], argv: &[&[u8]]) -> Self {
        let globals = Rc::new(Scope::default());
        globals.declare("KEYS", list(keys));
        globals.declare("ARGV", list(argv));
        let mut redis = Table::default();
        for (name, builtin) in [
            ("call", Builtin::Call),
            ("pcall", Builtin::Pcall),
            ("status_reply", Builtin::StatusReply),
            ("error_reply", Builtin::ErrorReply),
            ("register_function", Builtin::RegisterFunction),
            ("log", Builtin::Log),
            ("setresp", Builtin::SetResp),
        ] {
            redis.set(Key::Str(name.as_bytes().to_vec()), Value::Builtin(builtin));
        }
        for (name, level) in [
            ("LOG_DEBUG", 0.0),
            ("LOG_VERBOSE", 1.0),
            ("LOG_NOTICE", 2.0),
            ("LOG_WARNING", 3.0),
        ] {
            redis.set(Key::Str(name.as_bytes().to_vec()), Value::Num(level));
        }
        globals.declare("redis", Value::Table(Rc::new(RefCell::new(redis))));
        for (name, builtin) in [
            ("tonumber", Builtin::ToNumber),
            ("tostring", Builtin::ToString),
            ("type", Builtin::Type),
            ("error", Builtin::Error),
            ("unpack", Builtin::Unpack),
        ] {
            globals.declare(name, Value::Builtin(builtin));
        }
        Self {
            host,
            globals,
            steps: 0,
            calls: 0,
            line: 1,
            raised: false,
            concatenated: 0,
        }
    }

    /// The line of the statement that was running when the run ended.
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// Whether the error that ended the run is a command's error reply.
    pub(crate) fn raised(&self) -> bool {
        self.raised
    }

    /// Runs a chunk; its return value.
    pub(crate) fn run(&mut self, chunk: &Chunk) -> Result<Value, Error> {
        let scope = Scope::child(&self.globals);
        match self.block(&chunk.0.body, &scope)? {
            Flow::Return(value) => Ok(value),
            _ => Ok(Value::Nil),
        }
    }

    /// Calls a function value (a registered function, for FCALL).
    pub(crate) fn call_value(
        &mut self,
        function: &Value,
        args: Vec<Value>,
    ) -> Result<Value, Error> {
        self.call(function, args)
    }

    fn step(&mut self) -> Result<(), Error> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err("the script ran longer than the toy node allows".into());
        }
        Ok(())
    }

    /// One level deeper; an error past [`MAX_NESTING`].
    fn nest(&mut self) -> Result<(), Error> {
        self.calls += 1;
        if self.calls > MAX_NESTING {
            self.calls -= 1;
            return Err("stack overflow".into());
        }
        Ok(())
    }

    fn block(&mut self, block: &Block, scope: &Rc<Scope>) -> Result<Flow, Error> {
        self.nest()?;
        let flow = self.block_in(block, scope);
        self.calls -= 1;
        flow
    }

    fn block_in(&mut self, block: &Block, scope: &Rc<Scope>) -> Result<Flow, Error> {
        for (line, stat) in block {
            self.step()?;
            self.line = *line;
            match self.statement(stat, scope)? {
                Flow::Normal => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Normal)
    }

    fn statement(&mut self, stat: &Stat, scope: &Rc<Scope>) -> Result<Flow, Error> {
        match stat {
            Stat::Local(names, values) => {
                let values = self.values(values, scope, names.len())?;
                for (name, value) in names.iter().zip(values) {
                    scope.declare(name, value);
                }
            }
            Stat::Assign(targets, values) => {
                let values = self.values(values, scope, targets.len())?;
                for (target, value) in targets.iter().zip(values) {
                    self.assign(target, value, scope)?;
                }
            }
            Stat::Call(call) => {
                self.expr(call, scope)?;
            }
            Stat::Return(value) => {
                let value = match value {
                    Some(expr) => self.expr(expr, scope)?,
                    None => Value::Nil,
                };
                return Ok(Flow::Return(value));
            }
            Stat::If(arms, otherwise) => {
                for (cond, body) in arms {
                    if truthy(&self.expr(cond, scope)?) {
                        return self.block(body, &Scope::child(scope));
                    }
                }
                if let Some(body) = otherwise {
                    return self.block(body, &Scope::child(scope));
                }
            }
            Stat::While(cond, body) => {
                while truthy(&self.expr(cond, scope)?) {
                    self.step()?;
                    match self.block(body, &Scope::child(scope))? {
                        Flow::Break => break,
                        Flow::Return(value) => return Ok(Flow::Return(value)),
                        Flow::Normal => {}
                    }
                }
            }
            Stat::Do(body) => return self.block(body, &Scope::child(scope)),
            Stat::For(var, start, stop, step, body) => {
                let number = |v: Value, what: &str| {
                    to_number(&v).ok_or_else(|| format!("'for' {what} must be a number"))
                };
                let start = number(self.expr(start, scope)?, "initial value")?;
                let stop = number(self.expr(stop, scope)?, "limit")?;
                let step = match step {
                    Some(expr) => number(self.expr(expr, scope)?, "step")?,
                    None => 1.0,
                };
                if step == 0.0 {
                    return Err("'for' step is zero".into());
                }
                let mut i = start;
                while (step > 0.0 && i <= stop) || (step < 0.0 && i >= stop) {
                    self.step()?;
                    let inner = Scope::child(scope);
                    inner.declare(var, Value::Num(i));
                    match self.block(body, &inner)? {
                        Flow::Break => break,
                        Flow::Return(value) => return Ok(Flow::Return(value)),
                        Flow::Normal => {}
                    }
                    i += step;
                }
            }
            Stat::Break => return Ok(Flow::Break),
        }
        Ok(Flow::Normal)
    }

    /// `n` values from expressions (missing ones nil; a call's extra values dropped).
    fn values(&mut self, exprs: &[Expr], scope: &Rc<Scope>, n: usize) -> Result<Vec<Value>, Error> {
        let mut values = Vec::with_capacity(n);
        for expr in exprs {
            values.push(self.expr(expr, scope)?);
        }
        values.resize(n.max(values.len()), Value::Nil);
        Ok(values)
    }

    fn assign(&mut self, target: &Expr, value: Value, scope: &Rc<Scope>) -> Result<(), Error> {
        match target {
            Expr::Name(name) => {
                if !scope.assign(name, &value) {
                    return Err(format!(
                        "Script attempted to create global variable '{name}'"
                    ));
                }
                Ok(())
            }
            Expr::Index(table, key) => {
                let table = self.expr(table, scope)?;
                let key = key_of(&self.expr(key, scope)?)?;
                match table {
                    Value::Table(t) => {
                        t.borrow_mut().set(key, value);
                        Ok(())
                    }
                    other => Err(format!("attempt to index a {} value", type_name(&other))),
                }
            }
            _ => Err("cannot assign".into()),
        }
    }

    fn expr(&mut self, expr: &Expr, scope: &Rc<Scope>) -> Result<Value, Error> {
        self.nest()?;
        let value = self.expr_in(expr, scope);
        self.calls -= 1;
        value
    }

    fn expr_in(&mut self, expr: &Expr, scope: &Rc<Scope>) -> Result<Value, Error> {
        self.step()?;
        Ok(match expr {
            Expr::Nil => Value::Nil,
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Num(n) => Value::Num(*n),
            Expr::Str(s) => string(s),
            Expr::Func(def) => Value::Func(Rc::new(Closure {
                def: def.clone(),
                scope: scope.clone(),
            })),
            Expr::Table(items) => {
                let mut table = Table::default();
                let mut next = 1;
                for (key, value) in items {
                    let value = self.expr(value, scope)?;
                    match key {
                        Some(key) => {
                            let key = key_of(&self.expr(key, scope)?)?;
                            table.set(key, value);
                        }
                        None => {
                            table.set(Key::Int(next), value);
                            next += 1;
                        }
                    }
                }
                Value::Table(Rc::new(RefCell::new(table)))
            }
            Expr::Name(name) => match scope.lookup(name) {
                Some(value) => value,
                None => {
                    return Err(format!(
                        "Script attempted to access nonexistent global variable '{name}'"
                    ));
                }
            },
            Expr::Index(table, key) => {
                let table = self.expr(table, scope)?;
                let key = self.expr(key, scope)?;
                match table {
                    Value::Table(t) => t.borrow().get(&key_of(&key)?),
                    other => {
                        return Err(format!("attempt to index a {} value", type_name(&other)));
                    }
                }
            }
            Expr::Call(function, args) => {
                let function = self.expr(function, scope)?;
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(self.expr(arg, scope)?);
                }
                self.call(&function, values)?
            }
            Expr::Not(inner) => Value::Bool(!truthy(&self.expr(inner, scope)?)),
            Expr::Neg(inner) => match to_number(&self.expr(inner, scope)?) {
                Some(n) => Value::Num(-n),
                None => return Err("attempt to perform arithmetic on a non-number".into()),
            },
            Expr::Len(inner) => match self.expr(inner, scope)? {
                Value::Str(s) => Value::Num(s.len() as f64),
                Value::Table(t) => Value::Num(t.borrow().array.len() as f64),
                other => {
                    return Err(format!(
                        "attempt to get length of a {} value",
                        type_name(&other)
                    ));
                }
            },
            Expr::Bin(Op::And, a, b) => {
                let a = self.expr(a, scope)?;
                if truthy(&a) { self.expr(b, scope)? } else { a }
            }
            Expr::Bin(Op::Or, a, b) => {
                let a = self.expr(a, scope)?;
                if truthy(&a) { a } else { self.expr(b, scope)? }
            }
            Expr::Bin(op, a, b) => {
                let a = self.expr(a, scope)?;
                let b = self.expr(b, scope)?;
                let value = binary(*op, &a, &b)?;
                if let (Op::Concat, Value::Str(made)) = (op, &value) {
                    self.concatenated = self.concatenated.saturating_add(made.len());
                    if self.concatenated > MAX_CONCAT_BYTES {
                        return Err("not enough memory".into());
                    }
                }
                value
            }
        })
    }

    fn call(&mut self, function: &Value, args: Vec<Value>) -> Result<Value, Error> {
        self.nest()?;
        let result = match function {
            Value::Func(closure) => {
                let scope = Scope::child(&closure.scope);
                let mut args = args.into_iter();
                for param in &closure.def.params {
                    scope.declare(param, args.next().unwrap_or(Value::Nil));
                }
                match self.block(&closure.def.body, &scope) {
                    Ok(Flow::Return(value)) => Ok(value),
                    Ok(_) => Ok(Value::Nil),
                    Err(e) => Err(e),
                }
            }
            Value::Builtin(builtin) => self.builtin(*builtin, args),
            other => Err(format!("attempt to call a {} value", type_name(other))),
        };
        self.calls -= 1;
        result
    }

    fn builtin(&mut self, builtin: Builtin, args: Vec<Value>) -> Result<Value, Error> {
        match builtin {
            Builtin::Call | Builtin::Pcall => {
                let mut argv = Vec::with_capacity(args.len());
                for arg in &args {
                    match arg {
                        Value::Str(s) => argv.push(s.to_vec()),
                        Value::Num(n) => argv.push(number_text(*n).into_bytes()),
                        _ => {
                            let text =
                                b"ERR Lua redis lib command arguments must be strings or integers";
                            if builtin == Builtin::Pcall {
                                return Ok(record("err", string(text)));
                            }
                            self.raised = true;
                            return Err(String::from_utf8_lossy(text).into_owned());
                        }
                    }
                }
                if argv.is_empty() {
                    self.raised = true;
                    return Err(
                        "ERR Please specify at least one argument for this redis lib call".into(),
                    );
                }
                match self.host.call(&argv) {
                    Ok(value) => Ok(value),
                    Err(text) if builtin == Builtin::Pcall => Ok(record("err", string(&text))),
                    Err(text) => {
                        self.raised = true;
                        Err(String::from_utf8_lossy(&text).into_owned())
                    }
                }
            }
            Builtin::StatusReply => Ok(record("ok", args.into_iter().next().unwrap_or(Value::Nil))),
            Builtin::ErrorReply => Ok(record("err", args.into_iter().next().unwrap_or(Value::Nil))),
            Builtin::RegisterFunction => {
                let mut args = args.into_iter();
                let (name, function, flags) = match (args.next(), args.next()) {
                    (Some(Value::Str(name)), Some(function)) => {
                        (name.to_vec(), function, Vec::new())
                    }
                    (Some(Value::Table(t)), None) => {
                        let t = t.borrow();
                        let name = match t.field("function_name") {
                            Value::Str(s) => s.to_vec(),
                            _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                        };
                        let flags = match t.field("flags") {
                            Value::Table(f) => f
                                .borrow()
                                .array
                                .iter()
                                .filter_map(|v| match v {
                                    Value::Str(s) => Some(s.to_vec()),
                                    _ => None,
                                })
                                .collect(),
                            _ => Vec::new(),
                        };
                        (name, t.field("callback"), flags)
                    }
                    _ => return Err("wrong number of arguments to redis.register_function".into()),
                };
                if !matches!(function, Value::Func(_)) {
                    return Err(
                        "callback argument given to redis.register_function must be a function"
                            .into(),
                    );
                }
                self.host.register(name, function, flags)?;
                Ok(Value::Nil)
            }
            Builtin::Log => {
                let text: Vec<String> = args
                    .iter()
                    .skip(1)
                    .map(|v| match v {
                        Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
                        Value::Num(n) => number_text(*n),
                        other => type_name(other).to_string(),
                    })
                    .collect();
                self.host.log(&text.join(" "));
                Ok(Value::Nil)
            }
            Builtin::SetResp => Ok(Value::Nil),
            Builtin::ToNumber => Ok(args
                .first()
                .and_then(to_number)
                .map_or(Value::Nil, Value::Num)),
            Builtin::ToString => Ok(string(&match args.first() {
                Some(Value::Str(s)) => s.to_vec(),
                Some(Value::Num(n)) => number_text(*n).into_bytes(),
                Some(Value::Bool(b)) => b.to_string().into_bytes(),
                Some(Value::Nil) | None => b"nil".to_vec(),
                Some(other) => type_name(other).as_bytes().to_vec(),
            })),
            Builtin::Type => Ok(string(
                type_name(args.first().unwrap_or(&Value::Nil)).as_bytes(),
            )),
            Builtin::Error => Err(match args.first() {
                Some(Value::Str(s)) => String::from_utf8_lossy(s).into_owned(),
                Some(Value::Table(t)) => match t.borrow().field("err") {
                    Value::Str(s) => String::from_utf8_lossy(&s).into_owned(),
                    _ => "error".into(),
                },
                _ => "error".into(),
            }),
            Builtin::Unpack => Err("the toy's Lua returns one value: no unpack".into()),
        }
    }
}

fn binary(op: Op, a: &Value, b: &Value) -> Result<Value, Error> {
    let arith = |f: fn(f64, f64) -> f64| -> Result<Value, Error> {
        match (to_number(a), to_number(b)) {
            (Some(x), Some(y)) => Ok(Value::Num(f(x, y))),
            _ => Err("attempt to perform arithmetic on a non-number value".into()),
        }
    };
    match op {
        Op::Add => arith(|x, y| x + y),
        Op::Sub => arith(|x, y| x - y),
        Op::Mul => arith(|x, y| x * y),
        Op::Div => arith(|x, y| x / y),
        Op::Mod => arith(|x, y| x - (x / y).floor() * y),
        Op::Pow => arith(f64::powf),
        Op::Concat => {
            let text = |v: &Value| match v {
                Value::Str(s) => Ok(s.to_vec()),
                Value::Num(n) => Ok(number_text(*n).into_bytes()),
                other => Err(format!(
                    "attempt to concatenate a {} value",
                    type_name(other)
                )),
            };
            let mut out = text(a)?;
            out.extend(text(b)?);
            Ok(Value::Str(Rc::new(out)))
        }
        Op::Eq | Op::Ne => {
            let same = match (a, b) {
                (Value::Nil, Value::Nil) => true,
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Num(x), Value::Num(y)) => x == y,
                (Value::Str(x), Value::Str(y)) => x == y,
                (Value::Table(x), Value::Table(y)) => Rc::ptr_eq(x, y),
                (Value::Func(x), Value::Func(y)) => Rc::ptr_eq(x, y),
                (Value::Builtin(x), Value::Builtin(y)) => x == y,
                _ => false,
            };
            Ok(Value::Bool(same == (op == Op::Eq)))
        }
        Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            let order = match (a, b) {
                (Value::Num(x), Value::Num(y)) => x.partial_cmp(y),
                (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
                _ => return Err("attempt to compare two values of different types".into()),
            };
            let Some(order) = order else {
                return Ok(Value::Bool(false));
            };
            Ok(Value::Bool(match op {
                Op::Lt => order.is_lt(),
                Op::Le => order.is_le(),
                Op::Gt => order.is_gt(),
                _ => order.is_ge(),
            }))
        }
        // Evaluated lazily by `expr`, never here.
        Op::And | Op::Or => Err("internal error: a lazy operator evaluated eagerly".into()),
    }
}
