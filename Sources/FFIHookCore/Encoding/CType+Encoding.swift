extension CType {
    /// Appends this type's encoding; `names` keeps aggregate, member and class names.
    func appendEncoding(to text: inout String, names: Bool) {
        if names {
            for (qualifier, code) in Qualifiers.codes where qualifiers.contains(qualifier) {
                text.unicodeScalars.append(Unicode.Scalar(code))
            }
        }
        switch kind {
        case .void: text += "v"
        case .primitive(let primitive): text.append(primitive.code)
        case .pointer(let pointee):
            text += "^"
            pointee.appendEncoding(to: &text, names: names)
        case .cString: text += "*"
        case .object(let className):
            text += "@"
            if names, let className { text += "\"\(className)\"" }
        case .block: text += "@?"
        case .objectClass: text += "#"
        case .selector: text += ":"
        case .unknown: text += "?"
        case .array(let count, let element):
            text += "[\(count)"
            element.appendEncoding(to: &text, names: names)
            text += "]"
        case .structure(let name, let fields):
            appendAggregate(to: &text, open: "{", close: "}", name: name, fields: fields, names: names)
        case .union(let name, let fields):
            appendAggregate(to: &text, open: "(", close: ")", name: name, fields: fields, names: names)
        case .complex(let part):
            text += "j"
            text.append(part.code)
        case .bitField(let bitField):
            text += "b\(bitField.bitOffset)"
            text.append(bitField.base.code)
            text += "\(bitField.width)"
        }
    }

    private func appendAggregate(
        to text: inout String, open: String, close: String, name: String?, fields: [Field]?, names: Bool
    ) {
        text += open
        text += names ? (name ?? "?") : "?"
        if let fields {
            text += "="
            for field in fields {
                if names, let fieldName = field.name { text += "\"\(fieldName)\"" }
                field.type.appendEncoding(to: &text, names: names)
            }
        }
        text += close
    }

    /// The encoding without names and qualifiers: equal for types the ABI cannot tell apart.
    var abiKey: String {
        var text = ""
        appendEncoding(to: &text, names: false)
        return text
    }
}
